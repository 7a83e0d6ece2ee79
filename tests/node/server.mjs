// Starts a real `basalt` process for the Node.js end-to-end tests.
//
// Same life cycle as tests/e2e/basalt_server.py: a free port on 127.0.0.1, a temporary
// --dbpath, wait until the server answers ping, SIGTERM at the end. The binary comes
// from $BASALT_BIN, else $CARGO_TARGET_DIR/debug/basalt (what `make build` produces).

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { MongoClient } from 'mongodb';

const STARTUP_TIMEOUT_MS = 60_000;
const SHUTDOWN_TIMEOUT_MS = 20_000;

export function basaltBinary() {
  if (process.env.BASALT_BIN) return process.env.BASALT_BIN;
  const target = process.env.CARGO_TARGET_DIR || path.join(os.homedir(), '.cache', 'basalt-target');
  return path.join(target, 'debug', 'basalt');
}

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

async function answersPing(uri) {
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 500 });
  try {
    await client.db('admin').command({ ping: 1 });
    return true;
  } catch {
    return false;
  } finally {
    await client.close();
  }
}

/** Starts basalt; resolves to { uri, dir, log(), stop() } once it answers ping. */
export async function startServer() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'basalt-node-'));
  const dbpath = path.join(dir, 'data');
  mkdirSync(dbpath);
  const logPath = path.join(dir, 'basalt.log');
  const logFd = openSync(logPath, 'a');
  const port = await freePort();
  const args = ['--port', String(port), '--bind_ip', '127.0.0.1', '--dbpath', dbpath, '--quiet'];
  const child = spawn(basaltBinary(), args, { stdio: ['ignore', logFd, logFd] });
  const exited = once(child, 'exit');
  const log = () => readFileSync(logPath, 'utf8');
  const uri = `mongodb://127.0.0.1:${port}/`;

  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  while (!(await answersPing(uri))) {
    if (child.exitCode !== null) throw new Error(`basalt exited with ${child.exitCode}:\n${log()}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`basalt did not answer ping within ${STARTUP_TIMEOUT_MS} ms:\n${log()}`);
    }
    await sleep(100);
  }

  async function stop() {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), SHUTDOWN_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  }

  return { uri, dir, log, stop };
}
