// The shared KV tier (--kv-remote) between two real servers and a real redis-server on a
// free loopback port: the second server, with its own disk directory, serves a prefix the
// first one computed (x-flashkv-cache: remote) with the same greedy answer as a cold run;
// Redis killed mid-run never fails a request and uploads resume once it is back; a Redis
// out of memory refuses the uploads while serving goes on; against a real three-master
// Redis Cluster (redis-cli --cluster create) each server, seeded with a different node,
// follows the redirects and the second serves from it. Saves are version 2 with
// 128-token chunks, so an entry travels as its manifest plus the chunks it names. The binary is
// $FLASHKV_REDIS_SERVER or redis-server on PATH (scripts/deps.sh installs it).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import OpenAI from 'openai';
import { longSystem, metric, startServer, tempDir } from './lib/server.mjs';

function redisBinary() {
  const env = process.env.FLASHKV_REDIS_SERVER;
  if (env) return env;
  const found = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  if (found.status === 0 && found.stdout.trim()) return found.stdout.trim();
  throw new Error('redis-server not found: install it with `bash scripts/deps.sh` ' +
    '(Debian: apt-get install redis-server) or set FLASHKV_REDIS_SERVER');
}

async function freePort() {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address();
  srv.close();
  await once(srv, 'close');
  return port;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startRedis(port, extra = []) {
  const dir = tempDir(`redis-${port}`);
  const child = spawn(redisBinary(), ['--port', String(port), '--bind', '127.0.0.1', '--save', '',
    '--appendonly', 'no', '--dir', dir, '--logfile', path.join(dir, 'redis.log'), ...extra],
  { stdio: 'ignore' });
  const exited = once(child, 'exit');
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.on('connect', () => { s.write('PING\r\n'); });
      s.on('data', (d) => { s.destroy(); resolve(d.toString().startsWith('+PONG')); });
      s.on('error', () => resolve(false));
    });
    if (ok) return { child, async kill() { child.kill('SIGKILL'); await exited; } };
    if (child.exitCode !== null) throw new Error(`redis-server exited; see ${dir}/redis.log`);
    await sleep(50);
  }
  throw new Error('redis-server did not answer in 10 s');
}

async function until(what, fn, ms = 30000) {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    if (await fn()) return;
    await sleep(100);
  }
  assert.fail(`timed out waiting for ${what}`);
}

const openai = (server) => new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
const chat = (messages) => ({ model: 'm', messages, thinking: false, temperature: 0, max_tokens: 16 });
// `topic` first: conversations of different topics share no prefix in any tier.
const convo = (rules, question, topic = 'General') => [
  { role: 'system', content: `${topic} desk. ${longSystem(rules)}` },
  { role: 'user', content: question },
];
const cached = ['--ctx', '4096', '--kv-cache-min-tokens', '64', '--kv-disk-chunk-tokens', '128'];

test('a second server with its own disk serves a prefix the first computed, as a cold run would', async () => {
  const port = await freePort();
  const redis = await startRedis(port);
  const remote = ['--kv-remote', `redis://127.0.0.1:${port}/0`];
  const a = await startServer([...cached, '--kv-disk-dir', tempDir('remote-a'), ...remote], 'remote-a');
  await openai(a).chat.completions.create(chat(convo(30, 'Describe a lighthouse.')));
  // The cold anchor (the system prompt) was saved and mirrored.
  await until('the upload', async () => (await metric(a.url, 'flashkv_remote_uploads_total', 'result="ok"')) >= 1);
  assert.ok((await metric(a.url, 'flashkv_remote_bytes_total', 'direction="written"')) > 0);

  const dirB = tempDir('remote-b');
  const b = await startServer([...cached, '--kv-disk-dir', dirB, ...remote], 'remote-b');
  const messages = convo(30, 'And a windmill?');
  const { data: warm, response } = await openai(b).chat.completions.create(chat(messages)).withResponse();
  assert.match(response.headers.get('x-flashkv-cache'), /^remote; reused=\d+; prompt=\d+; restore_ms=[0-9.]+; match=remote-token/);
  const reused = warm.usage.prompt_tokens_details.cached_tokens;
  assert.ok(reused >= 64, `reused ${reused}`);
  assert.equal(await metric(b.url, 'flashkv_cache_lookups_total', 'tier="remote",result="hit"'), 1);
  assert.equal(await metric(b.url, 'flashkv_prompt_tokens_total', 'source="remote"'), reused);
  assert.ok((await metric(b.url, 'flashkv_remote_bytes_total', 'direction="read"')) > 0);
  assert.equal(await metric(b.url, 'flashkv_remote_errors_total', 'kind="damaged"'), 0);
  // Kept locally: B's own directory now holds the entry.
  assert.ok(fs.readdirSync(dirB).some((f) => f.endsWith('.kv')));
  assert.ok(fs.readdirSync(path.join(dirB, 'chunks')).some((f) => f.endsWith('.kvc')));

  const cold = await startServer(['--ctx', '4096'], 'remote-cold');
  const ref = await openai(cold).chat.completions.create(chat(messages));
  assert.equal(warm.choices[0].message.content, ref.choices[0].message.content);
  assert.equal(warm.usage.completion_tokens, ref.usage.completion_tokens);
  assert.equal(warm.usage.prompt_tokens, ref.usage.prompt_tokens);

  for (const s of [a, b, cold]) assert.equal(await s.stop(), 0);
  await redis.kill();
});

test('Redis killed mid-run: requests are still answered and uploads resume once it is back', async () => {
  const port = await freePort();
  let redis = await startRedis(port);
  const a = await startServer([...cached, '--kv-disk-dir', tempDir('remote-kill'),
    '--kv-remote', `redis://127.0.0.1:${port}`, '--kv-remote-timeout-ms', '500'], 'remote-kill');
  const client = openai(a);
  await client.chat.completions.create(chat(convo(20, 'One.', 'Harbour')));
  await until('the first upload', async () => (await metric(a.url, 'flashkv_remote_uploads_total', 'result="ok"')) >= 1);

  await redis.kill();
  // A new system prompt: a remote lookup (misses) and a cold save whose upload must wait.
  const r2 = await client.chat.completions.create(chat(convo(24, 'Two.', 'Mountain')));
  assert.ok(r2.choices[0].message.content.length >= 0);
  await until('the backoff', async () => (await metric(a.url, 'flashkv_remote_backoff', 'what="link"')) === 1);
  const r3 = await client.chat.completions.create(chat(convo(26, 'Three.', 'Desert')));
  assert.equal(r3.choices[0].finish_reason !== undefined, true);
  assert.ok((await metric(a.url, 'flashkv_remote_errors_total', 'kind="connection"')) >= 1);
  assert.equal(await metric(a.url, 'flashkv_requests_total', 'outcome="failed"'), 0);

  redis = await startRedis(port);
  await until('uploads to resume', async () =>
    (await metric(a.url, 'flashkv_remote_backoff', 'what="link"')) === 0 &&
    (await metric(a.url, 'flashkv_remote_uploads_total', 'result="ok"')) >= 3, 60000);
  assert.equal(await metric(a.url, 'flashkv_remote_upload_queue'), 0);
  assert.match(a.logText(), /unreachable .*retrying with backoff/);
  assert.match(a.logText(), /recovered/);
  assert.equal(await a.stop(), 0);
  await redis.kill();
});

test('a Redis out of memory refuses the uploads while serving goes on', async () => {
  const port = await freePort();
  const redis = await startRedis(port, ['--maxmemory', '1', '--maxmemory-policy', 'noeviction']);
  const a = await startServer([...cached, '--kv-disk-dir', tempDir('remote-full'),
    '--kv-remote', `redis://127.0.0.1:${port}`], 'remote-full');
  const client = openai(a);
  const first = await client.chat.completions.create(chat(convo(30, 'Full?')));
  await until('the refusal', async () => (await metric(a.url, 'flashkv_remote_refused_writes_total')) >= 1);
  assert.equal(await metric(a.url, 'flashkv_remote_backoff', 'what="writes"'), 1);
  assert.equal(await metric(a.url, 'flashkv_remote_backoff', 'what="link"'), 0);
  const second = await client.chat.completions.create(chat(convo(30, 'Full?')));
  assert.equal(second.choices[0].message.content, first.choices[0].message.content);
  assert.equal(await metric(a.url, 'flashkv_remote_uploads_total', 'result="ok"'), 0);
  assert.equal(await metric(a.url, 'flashkv_requests_total', 'outcome="failed"'), 0);
  assert.equal(await a.stop(), 0);
  await redis.kill();
});

// A RESP command's raw reply text (inline form: the arguments hold no spaces).
async function redisRaw(port, command) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let got = '';
    s.on('connect', () => s.write(`${command}\r\n`));
    s.on('data', (d) => {
      got += d.toString();
      if (/\r\n$/.test(got) && (!got.startsWith('$') || got.split('\r\n').length > 2)) {
        s.destroy();
        resolve(got);
      }
    });
    s.on('error', () => resolve(''));
  });
}

test('against a real Redis Cluster: redirects are followed and a second server serves from it', async () => {
  const nodes = [];
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    // The bus port is given: the default (port + 10000) may be out of range or taken.
    const bus = await freePort();
    nodes.push({ port, redis: await startRedis(port, ['--cluster-enabled', 'yes',
      '--cluster-config-file', 'nodes.conf', '--cluster-port', String(bus)]) });
  }
  const cli = path.join(path.dirname(redisBinary()), 'redis-cli');
  const created = spawnSync(process.env.FLASHKV_REDIS_CLI || cli,
    ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-yes'],
    { encoding: 'utf8' });
  assert.equal(created.status, 0, `redis-cli --cluster create: ${created.stdout}${created.stderr}`);
  for (const n of nodes) {
    await until('cluster_state:ok', async () =>
      (await redisRaw(n.port, 'CLUSTER INFO')).includes('cluster_state:ok'), 10000);
  }
  // Each server is given a different node as its seed.
  const a = await startServer([...cached, '--kv-disk-dir', tempDir('cluster-a'),
    '--kv-remote', `redis://127.0.0.1:${nodes[0].port}`], 'cluster-a');
  await openai(a).chat.completions.create(chat(convo(30, 'Describe a canal.', 'Cluster')));
  await until('the upload', async () => (await metric(a.url, 'flashkv_remote_uploads_total', 'result="ok"')) >= 1);
  assert.ok((await metric(a.url, 'flashkv_remote_redirects_total')) >= 1);

  const b = await startServer([...cached, '--kv-disk-dir', tempDir('cluster-b'),
    '--kv-remote', `redis://127.0.0.1:${nodes[2].port}`], 'cluster-b');
  const { response } = await openai(b).chat.completions
    .create(chat(convo(30, 'And a lock?', 'Cluster'))).withResponse();
  assert.match(response.headers.get('x-flashkv-cache'), /^remote; /);
  assert.equal(await metric(b.url, 'flashkv_cache_lookups_total', 'tier="remote",result="hit"'), 1);
  assert.ok((await metric(b.url, 'flashkv_remote_redirects_total')) >= 1);
  assert.equal(await metric(b.url, 'flashkv_remote_errors_total', 'kind="damaged"'), 0);
  for (const s of [a, b]) assert.equal(await s.stop(), 0);
  for (const n of nodes) await n.redis.kill();
});
