// Expert parallel in the server (docs/MULTI_GPU.md): `--expert-shards N`, the CPU form of
// several --gpus, spreads the routed experts over N backends in the one process. The
// answers are the one-backend server's, token for token, for concurrent (batched) requests
// and for live second turns; a snapshot a 3-shard server saves on shutdown restores in a
// one-backend server, and that one's in a 2-shard server, each answering as a server that
// never restarted.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import OpenAI from 'openai';
import { longSystem, startServer, tempDir } from './lib/server.mjs';

const openai = (server) => new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
const chat = (messages) => ({ model: 'm', messages, thinking: false, temperature: 0, max_tokens: 12 });
const shards = (n) => ['--ctx', '4096', '--expert-shards', String(n)];

const topics = ['lighthouses', 'the tides', 'a market in winter', 'clockwork'];
const first = (topic) => [{ role: 'system', content: longSystem(8) }, { role: 'user', content: `Tell me about ${topic}.` }];

// Every topic at once (the server batches them), then each one's second turn.
async function conversations(server) {
  const client = openai(server);
  const replies = await Promise.all(topics.map((t) => client.chat.completions.create(chat(first(t)))));
  const out = [];
  for (let i = 0; i < topics.length; ++i) {
    const messages = [...first(topics[i]), replies[i].choices[0].message, { role: 'user', content: 'Go on.' }];
    const { data, response } = await client.chat.completions.create(chat(messages)).withResponse();
    assert.match(response.headers.get('x-flashkv-cache'), /^live; /);
    out.push([replies[i].choices[0].message.content, data.choices[0].message.content]);
  }
  return out;
}

test('N CPU expert shards answer as one backend does', async () => {
  const one = await startServer(shards(1), 'shards-1');
  const want = await conversations(one);
  assert.equal(await one.stop(), 0);
  for (const n of [2, 3]) {
    const server = await startServer(shards(n), `shards-${n}`);
    assert.match(server.logText(), new RegExp(`expert parallel over ${n} cpu backends`));
    assert.deepEqual(await conversations(server), want, `${n} shards`);
    assert.equal(await server.stop(), 0);
  }
});

// The server must not start; its log says why.
async function refused(args, name) {
  const err = await startServer(args, name).then(() => null, (e) => e);
  assert.ok(err, `${name} started`);
  const m = err.message.match(/exited with (\d+) before listening; see (\S+)$/);
  assert.ok(m, err.message);
  assert.notEqual(Number(m[1]), 0);
  return fs.readFileSync(m[2], 'utf8');
}

test('bad shard counts stop the server with a clear error', async () => {
  assert.match(await refused(shards(9), 'shards-9'), /expert shards: 9 shards for 8 experts/);
  assert.match(await refused(['--expert-shards', '-2'], 'shards-neg'), /--expert-shards must be >= 1, got -2/);
});

test('a snapshot saved on 3 shards restores on 1, and one saved on 1 restores on 2', async () => {
  const turns = [
    [{ role: 'system', content: longSystem(30) }, { role: 'user', content: 'Describe a harbour.' }],
    'And its boats?',
    'And the people?',
  ];
  // The reference: one server, every turn live.
  const ref = await startServer(shards(1), 'snap-ref');
  const messages = [...turns[0]];
  const want = [];
  for (let i = 0; i < 3; ++i) {
    if (i > 0) messages.push({ role: 'user', content: turns[i] });
    const r = await openai(ref).chat.completions.create(chat(messages));
    want.push(r.choices[0].message.content);
    messages.push(r.choices[0].message);
  }
  assert.equal(await ref.stop(), 0);

  const dir = tempDir('kv-shards');
  const disk = (n) => [...shards(n), '--kv-disk-dir', dir, '--kv-cache-min-tokens', '64'];
  const convo = [...turns[0]];
  for (const [i, n] of [[0, 3], [1, 1], [2, 2]]) {
    const server = await startServer(disk(n), `snap-${n}`);
    if (i > 0) convo.push({ role: 'user', content: turns[i] });
    const { data, response } = await openai(server).chat.completions.create(chat(convo)).withResponse();
    if (i > 0) assert.match(response.headers.get('x-flashkv-cache'), /^disk; /, `turn ${i} on ${n} shard(s)`);
    assert.equal(data.choices[0].message.content, want[i], `turn ${i} on ${n} shard(s)`);
    convo.push(data.choices[0].message);
    assert.equal(await server.stop('SIGTERM'), 0);
    assert.match(server.logText(), /shutdown snapshot of session/);
  }
});
