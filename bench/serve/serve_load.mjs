#!/usr/bin/env node
// Bounded loopback load generator for `flashkv serve` (issue 18): for each client count,
// that many concurrent streaming clients each send --requests chat completions (greedy,
// --max-tokens each, distinct prompts so nobody reuses another's session) and the client
// times every streamed token. Per client count it prints the aggregate decode rate (all
// tokens / wall time), the p50/p99 gap between consecutive tokens of one stream, and p50/p99
// time to first token. --long-prompt N adds one cold N-token prompt arriving mid-run (after
// the first tenth of the streams' tokens), so its effect on the others' gaps shows.
// Only loopback addresses are driven; everything is bounded (requests, tokens, a timeout).
//
// node bench/serve/serve_load.mjs [--flashkv build/flashkv] [--model models/flashkv-tiny.gguf]
//   [--clients 1,4,16,64] [--requests 2] [--max-tokens 64] [--prompt-words 40]
//   [--long-prompt 0] [--ctx 4096] [--max-batch 64] [--live 64] [--threads 0]
//   [--url http://127.0.0.1:PORT]   (an already running server instead of starting one)
//   [--extra "--backend cuda ..."]  (more serve flags)
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const opt = {
  flashkv: 'build/flashkv', model: 'models/flashkv-tiny.gguf', clients: '1,4,16,64', requests: 2,
  'max-tokens': 64, 'prompt-words': 40, 'long-prompt': 0, ctx: 4096, 'max-batch': 64, live: 64,
  threads: 0, url: '', extra: '', 'timeout-s': 1800,
};
for (let i = 2; i < process.argv.length; i += 2) {
  const k = process.argv[i].replace(/^--/, '');
  if (!(k in opt)) throw new Error(`unknown option ${process.argv[i]}`);
  opt[k] = typeof opt[k] === 'number' ? Number(process.argv[i + 1]) : process.argv[i + 1];
}
const counts = opt.clients.split(',').map(Number);
if (counts.some((n) => !(n >= 1 && n <= 256))) throw new Error('--clients: 1..256 each');
if (!(opt.requests >= 1 && opt.requests <= 100)) throw new Error('--requests: 1..100');
const deadline = Date.now() + opt['timeout-s'] * 1000;

async function start() {
  const args = ['serve', '--model', opt.model, '--port', '0', '--ctx', String(opt.ctx),
    '--kv-live-sessions', String(opt.live), '--max-batch', String(opt['max-batch']),
    '--kv-ram-space-mb', '0', '--http-threads', String(Math.max(64, 2 * Math.max(...counts) + 8))];
  if (opt.threads > 0) args.push('--threads', String(opt.threads));
  if (opt.extra) args.push(...opt.extra.split(' ').filter(Boolean));
  const logPath = path.join(os.tmpdir(), `flashkv-load-${process.pid}.log`);
  const child = spawn(opt.flashkv, args, { stdio: ['ignore', 'pipe', fs.openSync(logPath, 'w')] });
  let out = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start; see ${logPath}`)), 600000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/[0-9.]+:\d+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.on('exit', (c) => { clearTimeout(timer); reject(new Error(`flashkv serve exited with ${c}; see ${logPath}`)); });
  });
  return { url, child, exited: once(child, 'exit'), logPath };
}

function prompt(tag, words) {
  const w = [];
  for (let i = 0; i < words; i++) w.push(`word${(i * 7 + tag.length) % 97}`);
  return `Request ${tag}. Continue this list in the same style: ${w.join(' ')}`;
}

// One streaming request; resolves with the client-side arrival time of every token chunk.
async function stream(url, content, maxTokens) {
  const t0 = performance.now();
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content }], max_tokens: maxTokens,
      thinking: false, temperature: 0, stream: true, stream_options: { include_usage: true } }),
    signal: AbortSignal.timeout(Math.max(1000, deadline - Date.now())),
  });
  if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
  const times = [];
  let tokens = 0;
  let buf = '';
  const dec = new TextDecoder();
  for await (const part of r.body) {
    buf += dec.decode(part, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, nl);
      buf = buf.slice(nl + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const j = JSON.parse(ev.slice(6));
      if (j.usage) tokens = j.usage.completion_tokens;
      const d = j.choices?.[0]?.delta;
      if (d && (d.content || d.reasoning_content)) times.push(performance.now());
    }
  }
  return { t0, times, tokens };
}

const pct = (xs, p) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function round(url, n) {
  const gaps = [];
  const ttft = [];
  let tokens = 0;
  let streamed = 0;
  let longDone = null;
  const total = n * opt.requests * opt['max-tokens'];
  const t0 = performance.now();
  const client = async (c) => {
    for (let k = 0; k < opt.requests; k++) {
      const s = await stream(url, prompt(`${n}-${c}-${k}`, opt['prompt-words']), opt['max-tokens']);
      tokens += s.tokens;
      streamed += s.times.length;
      if (s.times.length) ttft.push(s.times[0] - s.t0);
      for (let i = 1; i < s.times.length; i++) gaps.push(s.times[i] - s.times[i - 1]);
      if (opt['long-prompt'] > 0 && longDone === null && streamed * 10 >= total) {
        longDone = stream(url, prompt(`long-${n}`, Math.round(opt['long-prompt'] / 2)), 1);
      }
    }
  };
  await Promise.all(Array.from({ length: n }, (_, c) => client(c)));
  const wall = (performance.now() - t0) / 1000;
  let longTtft = '';
  if (longDone) {
    const l = await longDone;
    longTtft = ` | ${l.times.length ? (l.times[0] - l.t0).toFixed(0) : 'n/a'}`;
  }
  return `| ${n} | ${tokens} | ${wall.toFixed(2)} | ${(tokens / wall).toFixed(1)} | ${pct(gaps, 50).toFixed(1)} | ` +
    `${pct(gaps, 99).toFixed(1)} | ${pct(ttft, 50).toFixed(0)} | ${pct(ttft, 99).toFixed(0)}${longTtft} |`;
}

let server = null;
let url = opt.url;
if (url) {
  const host = new URL(url).hostname;
  if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(host)) throw new Error('--url must be a loopback address');
} else {
  server = await start();
  url = server.url;
}
const rows = [];
try {
  await stream(url, prompt('warm-up', 4), 2);
  for (const n of counts) {
    rows.push(await round(url, n));
    console.error(rows[rows.length - 1]);
  }
} finally {
  if (server) {
    server.child.kill('SIGTERM');
    await server.exited;
  }
}
console.log((opt.url ? `the server at ${opt.url}` : `model ${path.basename(opt.model)}, --ctx ${opt.ctx}, ` +
  `--max-batch ${opt['max-batch']}, --kv-live-sessions ${opt.live}${opt.extra ? ' ' + opt.extra : ''}`) +
  `, ${opt.requests} requests per client, max_tokens ${opt['max-tokens']}, ` +
  `${opt['prompt-words']}-word prompts${opt['long-prompt'] ? `, one ${opt['long-prompt']}-token-ish cold prompt mid-run` : ''}`);
console.log('');
console.log(`| clients | tokens | wall s | aggregate tok/s | p50 gap ms | p99 gap ms | p50 TTFT ms | p99 TTFT ms${opt['long-prompt'] ? ' | long prompt TTFT ms' : ''} |`);
console.log(`|---|---|---|---|---|---|---|---|${opt['long-prompt'] ? '---|' : ''}`);
for (const r of rows) console.log(r);
