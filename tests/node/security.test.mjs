// Access control through mongosh and the Node.js driver: the first user created through
// the localhost exception with mongosh's db.createUser, then connection strings with
// credentials and both SCRAM mechanisms, a role's refusal, and mongosh's user helpers.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { MongoClient } from 'mongodb';
import { runMongosh, startServer } from './server.mjs';

describe('access control', () => {
  let server;
  let home;
  const clients = [];

  const connect = async (user, password, options = {}) => {
    const client = new MongoClient(server.uri, {
      auth: { username: user, password },
      authSource: 'admin',
      serverSelectionTimeoutMS: 5000,
      ...options,
    });
    clients.push(client);
    await client.connect();
    return client;
  };

  before(async () => {
    server = await startServer(['--auth']);
    home = mkdtempSync(path.join(os.tmpdir(), 'basalt-mongosh-home-'));
  });

  after(async () => {
    for (const client of clients) await client.close();
    const log = server.log();
    await server.stop();
    rmSync(home, { recursive: true, force: true });
    assert.doesNotMatch(log, /panicked at/, 'basalt logged a panic');
  });

  test('mongosh creates the first user through the localhost exception', () => {
    const out = runMongosh(
      server.uri,
      `const admin = db.getSiblingDB('admin');
       admin.createUser({user: 'admin', pwd: 'admin-pw', roles: ['root']});
       // The exception has closed: mongosh's db.auth, then the user helpers.
       let refused = false;
       try { admin.getUsers(); } catch (e) { refused = e.code === 13; }
       print('refused before auth: ' + refused);
       admin.auth('admin', 'admin-pw');
       print(JSON.stringify(admin.getUsers().users.map((u) => u.user)));`,
      home,
    );
    assert.match(out, /refused before auth: true/);
    assert.match(out, /\["admin"\]/);
  });

  test('the driver authenticates with both mechanisms', async () => {
    for (const mechanism of ['SCRAM-SHA-1', 'SCRAM-SHA-256']) {
      const client = await connect('admin', 'admin-pw', { authMechanism: mechanism });
      await client.db('shop').collection('orders').insertOne({ by: mechanism });
      const status = await client.db('admin').command({ connectionStatus: 1 });
      assert.deepEqual(status.authInfo.authenticatedUsers, [{ user: 'admin', db: 'admin' }]);
    }
    const wrong = new MongoClient(server.uri, {
      auth: { username: 'admin', password: 'nope' },
      serverSelectionTimeoutMS: 3000,
    });
    clients.push(wrong);
    await assert.rejects(wrong.connect(), (e) => e.code === 18 && /Authentication failed/.test(e.message));
  });

  test('a read-only user is refused writes, with mongosh user helpers', async () => {
    const out = runMongosh(
      `mongodb://admin:admin-pw@${server.host}/shop?authSource=admin`,
      `db.createUser({user: 'reader', pwd: 'reader-pw', roles: [{role: 'read', db: 'shop'}]});
       db.grantRolesToUser('reader', [{role: 'read', db: 'other'}]);
       print(JSON.stringify(db.getUser('reader').roles.map((r) => r.db).sort()));`,
      home,
    );
    assert.match(out, /\["other","shop"\]/);
    const reader = new MongoClient(`mongodb://reader:reader-pw@${server.host}/shop`, {
      serverSelectionTimeoutMS: 5000,
    });
    clients.push(reader);
    assert.equal(await reader.db('shop').collection('orders').countDocuments(), 2);
    await assert.rejects(reader.db('shop').collection('orders').insertOne({}), (e) => e.code === 13);
    const shown = runMongosh(
      `mongodb://reader:reader-pw@${server.host}/shop`,
      `print(JSON.stringify(db.getMongo().getDBNames()))`,
      home,
    );
    assert.match(shown, /\["other","shop"\]|\["shop"\]/);
  });
});
