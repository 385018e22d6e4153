// Starts `flashkv serve` on a free loopback port for one test file and stops it again.
// The binary and the model come from the environment CTest sets (FLASHKV_BIN,
// FLASHKV_MODEL); every server logs to a file under FLASHKV_TEST_OUT for post-mortems.
// FLASHKV_SERVE_ARGS (flags split at whitespace) and FLASHKV_START_TIMEOUT_S (default 60)
// let the same suites run against a GPU server on a large model: scripts/cuda-check.sh's
// `device offload` with OFFLOAD_SDK=1 serves the 43-layer Flash file that way.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const BIN = process.env.FLASHKV_BIN;
const MODEL = process.env.FLASHKV_MODEL;
const EXTRA = (process.env.FLASHKV_SERVE_ARGS || '').split(/\s+/).filter((a) => a !== '');
const START_TIMEOUT_S = Number(process.env.FLASHKV_START_TIMEOUT_S || 60);
const OUT = process.env.FLASHKV_TEST_OUT || fs.mkdtempSync(path.join(os.tmpdir(), 'flashkv-e2e-'));
fs.mkdirSync(OUT, { recursive: true });

if (!BIN || !MODEL) {
  throw new Error('set FLASHKV_BIN (the flashkv binary) and FLASHKV_MODEL (a DS4 GGUF)');
}

export function tempDir(name) {
  const dir = path.join(OUT, `${name}-${process.pid}-${Date.now()}`);
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

let serial = 0;

// Resolves once the server prints its address; rejects if it exits first or takes longer
// than FLASHKV_START_TIMEOUT_S.
export async function startServer(args = [], name = 'server') {
  const log = path.join(OUT, `${name}-${process.pid}-${++serial}.log`);
  const logFd = fs.openSync(log, 'w');
  const child = spawn(BIN, ['serve', '--model', MODEL, '--port', '0', '--threads', '2', ...EXTRA, ...args], {
    stdio: ['ignore', 'pipe', logFd],
  });
  let stdout = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`server did not start in ${START_TIMEOUT_S} s; see ${log}`)),
      START_TIMEOUT_S * 1000,
    );
    child.stdout.on('data', (d) => {
      stdout += d.toString();
      const m = stdout.match(/listening on (http:\/\/[0-9.]+:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening; see ${log}`));
    });
  });
  const exited = once(child, 'exit');
  return {
    url,
    log,
    child,
    // SIGTERM, then the exit code (the server drains and saves before exiting).
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null) return child.exitCode;
      child.kill(signal);
      const [code] = await exited;
      fs.closeSync(logFd);
      return code;
    },
    logText() {
      return fs.readFileSync(log, 'utf8');
    },
  };
}

export async function getJson(url) {
  const r = await fetch(url);
  return { status: r.status, body: await r.json() };
}

// One sample of a Prometheus metric (labels as written, e.g. 'source="live"').
export async function metric(base, name, labels = '') {
  const text = await (await fetch(`${base}/metrics`)).text();
  const key = labels ? `${name}{${labels}}` : name;
  for (const line of text.split('\n')) {
    if (line.startsWith(key + ' ')) return Number(line.slice(key.length + 1));
  }
  return undefined;
}

// A long, deterministic system prompt so reuse is worth measuring.
export function longSystem(rules) {
  const parts = [];
  for (let i = 0; i < rules; i++) parts.push(`Rule ${i}: answer questions about topic ${i} briefly and precisely.`);
  return parts.join(' ');
}
