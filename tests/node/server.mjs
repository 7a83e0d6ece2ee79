// Starts a real `basalt` process for the Node.js end-to-end tests.
//
// Same life cycle as tests/e2e/basalt_server.py: a free port on 127.0.0.1, a temporary
// --dbpath, wait until the server answers ping, SIGTERM at the end. The binary comes
// from $BASALT_BIN, else $CARGO_TARGET_DIR/debug/basalt (what `make build` produces).

import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { MongoClient } from 'mongodb';

const STARTUP_TIMEOUT_MS = 60_000;
const MONGOSH = path.join(path.dirname(fileURLToPath(import.meta.url)), 'node_modules', '.bin', 'mongosh');
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
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 500, directConnection: true });
  try {
    await client.db('admin').command({ ping: 1 });
    return true;
  } catch {
    return false;
  } finally {
    await client.close();
  }
}

/** Starts basalt with `extraArgs` (e.g. ['--replSet', 'rs0']); resolves to
 * { uri, host, dir, log(), stop() } once it answers ping. */
export async function startServer(extraArgs = []) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'basalt-node-'));
  const dbpath = path.join(dir, 'data');
  mkdirSync(dbpath);
  const logPath = path.join(dir, 'basalt.log');
  const logFd = openSync(logPath, 'a');
  const port = await freePort();
  const args = [
    '--port',
    String(port),
    '--bind_ip',
    '127.0.0.1',
    '--dbpath',
    dbpath,
    '--quiet',
    ...extraArgs,
  ];
  const child = spawn(basaltBinary(), args, { stdio: ['ignore', logFd, logFd] });
  const exited = once(child, 'exit');
  const log = () => readFileSync(logPath, 'utf8');
  const host = `127.0.0.1:${port}`;
  const uri = `mongodb://${host}/`;

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

  return { uri, host, dir, log, stop };
}

/** Runs a mongosh script against `uri` with a private HOME; returns its output. */
export function runMongosh(uri, script, home) {
  const result = spawnSync(MONGOSH, [uri, '--quiet', '--norc', '--eval', script], {
    encoding: 'utf8',
    timeout: 60_000,
    // A private HOME for mongosh's logs and history; no telemetry from tests.
    env: {
      ...process.env,
      HOME: home,
      MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING: '1',
      MONGOSH_TELEMETRY_ENDPOINT: '',
    },
  });
  if (result.error !== undefined) throw new Error(`mongosh did not run: ${result.error}`);
  if (result.status !== 0) throw new Error(`mongosh failed:\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}
