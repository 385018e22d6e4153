#!/usr/bin/env node
// Time to first token of `flashkv serve` for a long prompt, by where the prefix comes from:
//   cold  — first turn of a conversation: the whole prompt is prefilled;
//   live  — the next turn: the live session is extended by the new suffix only;
//   disk  — one more turn after SIGTERM + restart: the shutdown snapshot is restored from
//           disk, then the suffix is prefilled.
// Each measurement is one non-streaming request with max_tokens 1 (restore + prefill +
// sampling the first token + HTTP), timed by the client. Each repetition is its own
// conversation (a distinct first line), so repetitions never reuse each other.
//
// node bench/serve/serve_ttft.mjs [--flashkv build/flashkv] [--model models/flashkv-tiny.gguf]
//                                 [--prompt-tokens 6000] [--reps 3] [--threads 0]
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const opt = { flashkv: 'build/flashkv', model: 'models/flashkv-tiny.gguf', 'prompt-tokens': 6000, reps: 3, threads: 0 };
for (let i = 2; i < process.argv.length; i += 2) {
  const k = process.argv[i].replace(/^--/, '');
  if (!(k in opt)) throw new Error(`unknown option ${process.argv[i]}`);
  opt[k] = typeof opt[k] === 'number' ? Number(process.argv[i + 1]) : process.argv[i + 1];
}
const reps = Math.min(opt.reps, 4); // all conversations must stay live until the restart
const ctx = Math.ceil((opt['prompt-tokens'] * 1.3 + 512) / 256) * 256;
const kvDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flashkv-ttft-'));

async function start() {
  const args = ['serve', '--model', opt.model, '--port', '0', '--ctx', String(ctx), '--kv-disk-dir', kvDir,
    '--kv-live-sessions', '4'];
  if (opt.threads > 0) args.push('--threads', String(opt.threads));
  const log = fs.openSync(path.join(os.tmpdir(), 'flashkv-ttft-server.log'), 'a');
  const child = spawn(opt.flashkv, args, { stdio: ['ignore', 'pipe', log] });
  const t0 = Date.now();
  let out = '';
  const url = await new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/[0-9.]+:\d+)/);
      if (m) resolve(m[1]);
    });
    child.on('exit', (c) => reject(new Error(`flashkv serve exited with ${c}`)));
  });
  return { url, child, exited: once(child, 'exit'), startMs: Date.now() - t0 };
}

async function turn(url, messages) {
  const t0 = performance.now();
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: 1, thinking: false, temperature: 0 }),
  });
  const body = await r.json();
  const ms = performance.now() - t0;
  if (r.status !== 200) throw new Error(JSON.stringify(body));
  const header = r.headers.get('x-flashkv-cache');
  return { ms, header, usage: body.usage, reply: body.choices[0].message };
}

// ~4 characters per token of English prose.
const text = fs.readFileSync(path.join(root, 'data/bench/devils-dictionary.txt'), 'utf8');
const system = (k) => `Conversation ${k}.\n` + text.slice(0, opt['prompt-tokens'] * 4);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

let server = await start();
const convs = [];
const cold = [];
const live = [];
for (let k = 0; k < reps; k++) {
  const messages = [{ role: 'system', content: system(k) }, { role: 'user', content: 'Summarise the entries above.' }];
  const a = await turn(server.url, messages);
  messages.push(a.reply, { role: 'user', content: 'Now the first one only.' });
  const b = await turn(server.url, messages);
  messages.push(b.reply, { role: 'user', content: 'And the last one.' });
  cold.push(a);
  live.push(b);
  convs.push(messages);
  console.error(`rep ${k}: cold ${a.ms.toFixed(0)} ms [${a.header}], live ${b.ms.toFixed(0)} ms [${b.header}]`);
}
server.child.kill('SIGTERM');
const [code] = await server.exited;
if (code !== 0) throw new Error(`server exit code ${code}`);
server = await start();
const disk = [];
for (let k = 0; k < reps; k++) {
  const c = await turn(server.url, convs[k]);
  disk.push(c);
  console.error(`rep ${k}: disk ${c.ms.toFixed(0)} ms [${c.header}]`);
}
server.child.kill('SIGTERM');
await server.exited;
fs.rmSync(kvDir, { recursive: true, force: true });

for (const [name, runs, want] of [['cold', cold, 'none'], ['live', live, 'live'], ['disk', disk, 'disk']]) {
  for (const r of runs) if (!r.header.startsWith(want)) throw new Error(`${name} turn was served as ${r.header}`);
}
const mc = median(cold.map((r) => r.ms));
const ml = median(live.map((r) => r.ms));
const md = median(disk.map((r) => r.ms));
const restore = median(disk.map((r) => Number(r.header.match(/restore_ms=([0-9.]+)/)[1])));
const row = (name, runs, m) =>
  `| ${name} | ${median(runs.map((r) => r.usage.prompt_tokens))} | ${median(runs.map((r) => r.usage.prompt_tokens_details.cached_tokens))} | ${m.toFixed(0)} | ${(mc / m).toFixed(1)}x |`;
console.log(`model ${path.basename(opt.model)}, --ctx ${ctx}, ${reps} conversations, median of ${reps}, server restart ${server.startMs} ms`);
console.log('');
console.log('| prefix from | prompt tokens | reused tokens | TTFT ms | speed-up vs cold |');
console.log('|---|---|---|---|---|');
console.log(row('cold prefill', cold, mc));
console.log(row('live session', live, ml));
console.log(row(`disk snapshot after restart (restore ${restore.toFixed(1)} ms)`, disk, md));
