// A replica set through mongosh's rs helpers and the Node.js driver.
//
// mongosh builds the set as a user does (rs.initiate with one member, rs.add for the
// others, rs.conf, rs.status, rs.stepDown); the driver then finds the primary from the
// seed list, reads from a secondary, and keeps writing (retryable writes) across a
// step-down.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { MongoClient } from 'mongodb';
import { runMongosh, startServer } from './server.mjs';

const SET = 'rsnode';
const WAIT_MS = 20_000;

async function waitFor(what, predicate) {
  const deadline = Date.now() + WAIT_MS;
  while (Date.now() < deadline) {
    if (await predicate()) return;
    await sleep(50);
  }
  throw new Error(`${what} not reached within ${WAIT_MS} ms`);
}

describe('replica set', () => {
  const members = [];
  let home;
  let client;

  before(async () => {
    for (let i = 0; i < 3; i += 1) members.push(await startServer(['--replSet', SET]));
    home = mkdtempSync(path.join(os.tmpdir(), 'basalt-mongosh-home-'));
  });

  after(async () => {
    await client?.close();
    for (const member of members) {
      const log = member.log();
      await member.stop();
      assert.doesNotMatch(log, /panicked at/, 'basalt logged a panic');
    }
    rmSync(home, { recursive: true, force: true });
  });

  test('mongosh: rs.initiate, rs.add, rs.conf, rs.status', () => {
    const [first, second, third] = members.map((m) => m.host);
    const out = runMongosh(
      `${members[0].uri}?directConnection=true`,
      `rs.initiate({_id: '${SET}', members: [{_id: 0, host: '${first}'}]});
       for (let i = 0; i < 400 && !db.hello().isWritablePrimary; i++) sleep(50);
       rs.add('${second}');
       rs.add({host: '${third}', priority: 0});
       const conf = rs.conf();
       let states = [];
       for (let i = 0; i < 400; i++) {
         states = rs.status().members.map((m) => m.stateStr).sort();
         if (states.join() === 'PRIMARY,SECONDARY,SECONDARY') break;
         sleep(50);
       }
       print(EJSON.stringify({
         set: conf._id,
         hosts: conf.members.map((m) => m.host),
         priorities: conf.members.map((m) => m.priority),
         states,
       }));`,
      home,
    );
    const summary = JSON.parse(out.trim().split('\n').pop());
    assert.equal(summary.set, SET);
    assert.deepEqual(summary.hosts, [first, second, third]);
    assert.deepEqual(summary.priorities, [1, 1, 0]);
    assert.deepEqual(summary.states, ['PRIMARY', 'SECONDARY', 'SECONDARY']);
  });

  test('driver: discovery, secondary reads, writes across a step-down', async () => {
    const seeds = members.map((m) => m.host).join(',');
    client = new MongoClient(`mongodb://${seeds}/?replicaSet=${SET}&w=majority`, {
      serverSelectionTimeoutMS: WAIT_MS,
    });
    await client.connect();
    const coll = client.db('node').collection('rs');
    await coll.insertOne({ _id: 1 });
    const fromSecondary = client
      .db('node', { readPreference: 'secondary' })
      .collection('rs');
    await waitFor('the write on a secondary', async () => (await fromSecondary.findOne({ _id: 1 })) !== null);

    const before = (await client.db('admin').command({ hello: 1 })).primary;
    assert.ok(before, 'hello names a primary');
    const stepDown = runMongosh(
      `mongodb://${before}/?directConnection=true`,
      'rs.stepDown(30); print("stepped down")',
      home,
    );
    assert.match(stepDown, /stepped down/);
    // The driver learns of the new primary and the retryable write goes there.
    await coll.insertOne({ _id: 2 });
    const after = (await client.db('admin').command({ hello: 1 })).primary;
    assert.notEqual(after, before);
    assert.equal(await coll.countDocuments({}), 2);
  });
});
