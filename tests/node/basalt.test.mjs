// End-to-end tests through the official Node.js driver and through mongosh.
//
// Node is MongoDB's most used driver and mongosh its shell; both run their own
// handshake and startup commands (mongosh asks for buildInfo, getLog, getCmdLineOpts,
// ...) before the first query, so they catch incompatibilities pymongo does not.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { MongoBulkWriteError, MongoClient, MongoServerError } from 'mongodb';
import { runMongosh, startServer } from './server.mjs';


let server;
let client;

before(async () => {
  server = await startServer();
  client = new MongoClient(server.uri);
  await client.connect();
});

after(async () => {
  await client?.close();
  const log = server?.log() ?? '';
  await server?.stop();
  assert.doesNotMatch(log, /panicked at/, 'basalt logged a panic');
});

describe('Node.js driver', () => {
  test('insert and find with filter, sort and projection', async () => {
    const coll = client.db('node').collection('fruit');
    const inserted = await coll.insertMany([
      { item: 'apple', qty: 5 },
      { item: 'pear', qty: 1 },
      { item: 'plum', qty: 9 },
    ]);
    assert.equal(inserted.insertedCount, 3);
    const found = await coll
      .find({ qty: { $gt: 1 } })
      .sort({ qty: -1 })
      .project({ _id: 0, item: 1 })
      .toArray();
    assert.deepEqual(found, [{ item: 'plum' }, { item: 'apple' }]);
    const one = await coll.findOne({ item: 'pear' });
    assert.equal(one.qty, 1);
    assert.equal(typeof one._id.toHexString(), 'string');
  });

  test('update and delete report counts', async () => {
    const coll = client.db('node').collection('counts');
    await coll.insertMany([0, 1, 2, 3, 4, 5].map((i) => ({ _id: i, odd: i % 2 === 1 })));
    const updated = await coll.updateMany({ odd: true }, { $set: { tagged: true } });
    assert.equal(updated.matchedCount, 3);
    assert.equal(updated.modifiedCount, 3);
    const upserted = await coll.updateOne({ _id: 'new' }, { $inc: { n: 1 } }, { upsert: true });
    assert.equal(upserted.upsertedId, 'new');
    const deleted = await coll.deleteMany({ odd: false });
    assert.equal(deleted.deletedCount, 3);
    assert.equal(await coll.countDocuments({}), 4);
  });

  test('cursor over many batches', async () => {
    const coll = client.db('node').collection('cursor');
    await coll.insertMany(Array.from({ length: 1000 }, (_, i) => ({ _id: i })));
    const ids = [];
    for await (const doc of coll.find({}).sort({ _id: 1 }).batchSize(64)) ids.push(doc._id);
    assert.deepEqual(ids, Array.from({ length: 1000 }, (_, i) => i));
  });

  test('aggregate groups', async () => {
    const coll = client.db('node').collection('agg');
    await coll.insertMany([
      { k: 'a', v: 1 },
      { k: 'b', v: 2 },
      { k: 'a', v: 3 },
    ]);
    const groups = await coll
      .aggregate([{ $group: { _id: '$k', total: { $sum: '$v' } } }, { $sort: { _id: 1 } }])
      .toArray();
    assert.deepEqual(groups, [
      { _id: 'a', total: 4 },
      { _id: 'b', total: 2 },
    ]);
  });

  test('duplicate keys fail with code 11000', async () => {
    const coll = client.db('node').collection('dup');
    await coll.insertOne({ _id: 1 });
    await assert.rejects(coll.insertOne({ _id: 1 }), (err) => {
      assert.ok(err instanceof MongoServerError);
      assert.equal(err.code, 11000);
      return true;
    });
    await assert.rejects(
      coll.insertMany([{ _id: 2 }, { _id: 1 }, { _id: 3 }], { ordered: false }),
      (err) => {
        assert.ok(err instanceof MongoBulkWriteError);
        assert.deepEqual(
          err.writeErrors.map((e) => [e.index, e.code]),
          [[1, 11000]],
        );
        return true;
      },
    );
    assert.equal(await coll.countDocuments({}), 3);
  });
});

describe('mongosh', () => {
  let home;
  before(() => {
    home = mkdtempSync(path.join(os.tmpdir(), 'basalt-mongosh-home-'));
  });
  after(() => rmSync(home, { recursive: true, force: true }));

  const mongosh = (script) => runMongosh(`${server.uri}test`, script, home);

  test('insertOne then printjson(find().toArray())', () => {
    const out = mongosh('db.t.insertOne({a:1}); printjson(db.t.find().toArray())');
    assert.match(out, /_id: ObjectId\('[0-9a-f]{24}'\)/);
    assert.match(out, /\ba: 1\b/);
  });

  test('EJSON output of a query is exact', () => {
    const out = mongosh(
      'db.s.insertMany([{_id: 1, x: "a"}, {_id: 2, x: "b"}]);' +
        'print(EJSON.stringify(db.s.find({_id: {$gt: 1}}).toArray()))',
    );
    assert.equal(out.trim(), '[{"_id":2,"x":"b"}]');
  });

  // The shell's operator helpers, as the README's Operations section writes them.
  test('profiler, currentOp and killOp helpers', () => {
    const out = mongosh(
      'db.dropDatabase(); db.setProfilingLevel(2, { slowms: 50 });' +
        'db.items.insertOne({ n: 1 }); db.items.find({ n: 1 }).toArray();' +
        'db.setProfilingLevel(1, { filter: { op: "query", millis: { $gt: 20 } } });' +
        'const level = db.getProfilingStatus();' +
        'db.setProfilingLevel(0, { filter: "unset", slowms: 100 });' +
        'const entry = db.system.profile.find({ op: "query" }).sort({ ts: -1 }).toArray()[0];' +
        'const ops = db.currentOp({ ns: "admin.$cmd.aggregate" }).inprog;' +
        'const killed = db.killOp(2147483000);' +
        'print(EJSON.stringify({ was: level.was, slowms: level.slowms, filter: level.filter,' +
        '  ns: entry.ns, plan: entry.planSummary, returned: entry.nreturned,' +
        '  examined: entry.docsExamined, ops: ops.length, killed: killed.info }))',
    );
    assert.deepEqual(JSON.parse(out.trim().split('\n').pop()), {
      was: 1,
      slowms: 50,
      filter: { $and: [{ op: { $eq: 'query' } }, { millis: { $gt: 20 } }] },
      ns: 'test.items',
      plan: 'COLLSCAN',
      returned: 1,
      examined: 1,
      ops: 1,
      killed: 'attempting to kill op',
    });
  });
});
