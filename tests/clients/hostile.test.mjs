// Issue 17, end to end on the real `flashkv serve`: requests an attacker would send each
// get a clear 4xx in their API's shape while the server stays up and keeps answering —
// JSON nested a million levels deep inside every string the server parses as JSON, numbers
// beyond double's range, malformed fields, a gzip bomb, hostile Content-Lengths, 200
// connections trickling their headers, and a page's cross-site or DNS-rebinding request.
// Every wait is a generous bound on something that happens at once on a correct server.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import zlib from 'node:zlib';
import { after, before, test } from 'node:test';
import { getJson, startServer } from './lib/server.mjs';

let server;

before(async () => {
  server = await startServer(['--ctx', '2048', '--max-body-mb', '8'], 'hostile');
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

async function post(path, body, headers = {}) {
  const r = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: r.status, json, text };
}

const message = (r) => (r.json?.error?.message ?? '');

async function healthy() {
  const h = await getJson(`${server.url}/health`);
  assert.equal(h.status, 200);
}

const deepObject = (n) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);
const deepArray = (n) => '['.repeat(n) + ']'.repeat(n);

test('JSON nested 10^6 deep in any string the server parses is a 400 naming the field', async () => {
  const deep = deepObject(1000000);
  const chat = await post('/v1/chat/completions', JSON.stringify({
    messages: [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: deep } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'ok' },
    ],
    max_tokens: 2,
  }));
  assert.equal(chat.status, 400, chat.text);
  assert.equal(message(chat), "'messages[1].tool_calls[0].function.arguments' holds JSON nested deeper than 256 levels");
  const call = await post('/v1/responses', JSON.stringify({
    input: [{ role: 'user', content: 'hi' }, { type: 'function_call', call_id: 'c1', name: 'f', arguments: deep },
      { type: 'function_call_output', call_id: 'c1', output: 'ok' }],
  }));
  assert.equal(call.status, 400);
  assert.equal(message(call), "'input[1].arguments' holds JSON nested deeper than 256 levels");
  for (const [type, key] of [['local_shell_call', 'action'], ['tool_search_call', 'arguments'], ['web_search_call', 'input']]) {
    const r = await post('/v1/responses', JSON.stringify({
      input: [{ role: 'user', content: 'hi' }, { type, call_id: 'c2', [key]: deepArray(1000000) }],
    }));
    assert.equal(r.status, 400, type);
    assert.equal(message(r), `'input[1].${key}' holds JSON nested deeper than 256 levels`);
  }
  // Anthropic's tool_use input is an object in the body: the body's own limit.
  const a = await post('/v1/messages', '{"max_tokens":2,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":' +
    deep + '}]}]}');
  assert.equal(a.status, 400);
  assert.equal(a.json.type, 'error');
  assert.equal(a.json.error.message, 'JSON nesting deeper than 256 levels');
  await healthy();
});

test('numbers beyond double are 400s on all five POST endpoints', async () => {
  const bodies = {
    '/v1/chat/completions': '{"messages":[{"role":"user","content":"hi"}],"max_tokens":1e999999}',
    '/v1/completions': '{"prompt":"hi","max_tokens":1e999999}',
    '/v1/responses': '{"input":"hi","max_output_tokens":1e999999}',
    '/v1/messages': '{"messages":[{"role":"user","content":"hi"}],"max_tokens":1e999999}',
    '/v1/messages/count_tokens': '{"messages":[{"role":"user","content":"hi"}],"max_tokens":1e999999}',
  };
  for (const [path, body] of Object.entries(bodies)) {
    const r = await post(path, body);
    assert.equal(r.status, 400, path);
    assert.match(r.text, /number overflow parsing '1e999999'/, path);
  }
  await healthy();
});

test('malformed fields are 400s in each API\'s own error shape', async () => {
  const openai = await post('/v1/chat/completions', '{"messages":[{"role":"user","content":"x"}],"tool_choice":"bogus"}');
  assert.equal(openai.status, 400);
  assert.equal(openai.json.error.type, 'invalid_request_error');
  assert.match(openai.json.error.message, /'tool_choice' must be one of none, auto, required/);
  const anthropic = await post('/v1/messages',
    '{"max_tokens":5,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled","budget_tokens":-1}}');
  assert.equal(anthropic.status, 400);
  assert.equal(anthropic.json.type, 'error');
  assert.equal(anthropic.json.error.type, 'invalid_request_error');
  assert.match(anthropic.json.error.message, /'thinking.budget_tokens' must be between 1 and/);
  const responses = await post('/v1/responses', '{"input":"x","tools":[{"type":"wat"}]}');
  assert.equal(responses.status, 400);
  assert.match(responses.json.error.message, /'tools\[0\].type' "wat" is not a Responses tool type/);
});

function peakRssKiB(pid) {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmHWM:\s+(\d+) kB/);
  return Number(m[1]);
}

// 1 GiB of zeros in ~1 MB, compressed in pieces so the test never holds the gigabyte.
function gzipBomb(bytes) {
  return new Promise((resolve, reject) => {
    const gz = zlib.createGzip({ level: 9 });
    const out = [];
    gz.on('data', (d) => out.push(d));
    gz.on('end', () => resolve(Buffer.concat(out)));
    gz.on('error', reject);
    const piece = Buffer.alloc(1 << 20);
    let left = bytes;
    const pump = () => {
      while (left > 0) {
        left -= piece.length;
        if (!gz.write(piece)) {
          gz.once('drain', pump);
          return;
        }
      }
      gz.end();
    };
    pump();
  });
}

test('a gzip bomb is refused once the decoded body passes the limit, in bounded memory', async () => {
  const bomb = await gzipBomb(1 << 30);
  assert.ok(bomb.length < 8 << 20, `bomb is ${bomb.length} bytes`);
  const before = peakRssKiB(server.child.pid);
  const r = await post('/v1/chat/completions', bomb, { 'content-encoding': 'gzip' });
  assert.equal(r.status, 413);
  assert.match(message(r), /exceeds the limit of 8388608 bytes once decompressed/);
  // The server never held more than a little over the limit (issue 17: 5 GiB before).
  const grown = peakRssKiB(server.child.pid) - before;
  assert.ok(grown < 256 * 1024, `peak RSS grew by ${grown} KiB`);
  // A gzipped request within the limit is served.
  const ok = await post('/v1/chat/completions',
    zlib.gzipSync(JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, thinking: false })),
    { 'content-encoding': 'gzip' });
  assert.equal(ok.status, 200, ok.text);
});

// The raw answer to `head` sent on its own socket (no body follows); resolves at close.
function rawExchange(head, { keepOpen = false } = {}) {
  const u = new URL(server.url);
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(u.port), u.hostname);
    let got = '';
    s.on('connect', () => s.write(head));
    s.on('data', (d) => {
      got += d.toString();
      if (keepOpen && got.includes('\r\n\r\n')) {
        s.destroy();
        resolve(got);
      }
    });
    s.on('end', () => resolve(got));
    s.on('close', () => resolve(got));
    s.on('error', (e) => (e.code === 'ECONNRESET' ? resolve(got) : reject(e)));
  });
}

test('huge, negative and malformed Content-Lengths are answered from the headers', async () => {
  const host = new URL(server.url).host;
  const head = (cl) => `POST /v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${cl}\r\n\r\n`;
  for (const [cl, status] of [['99999999999999', 413], ['-1', 400], ['1x', 400], ['99999999999999999999999', 400]]) {
    const got = await rawExchange(head(cl));
    assert.match(got, new RegExp(`^HTTP/1.1 ${status} `), `${cl}: ${got}`);
    assert.match(got, /invalid_request_error|request_too_large/);
  }
  await healthy();
});

test('200 connections trickling their headers keep neither /health nor a real request out', async () => {
  const u = new URL(server.url);
  const slow = [];
  let closed = 0;
  for (let i = 0; i < 200; i++) {
    const s = net.connect(Number(u.port), u.hostname);
    s.on('error', () => {});
    s.on('close', () => closed++);
    s.write(`GET /health HTTP/1.1\r\nHost: ${u.host}\r\n`);
    slow.push(s);
  }
  let line = 0;
  const trickle = setInterval(() => {
    line++;
    for (const s of slow) if (!s.destroyed) s.write(`X-Slow-${line}: 1\r\n`);
  }, 1000);
  try {
    await new Promise((r) => setTimeout(r, 500));
    await healthy();
    const r = await post('/v1/chat/completions', JSON.stringify({
      messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, thinking: false }));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.usage.completion_tokens, 4);
    await healthy();
    // Each trickling connection ends: dropped for a newcomer or at its header deadline.
    const end = Date.now() + 120000;
    while (closed < slow.length && Date.now() < end) await new Promise((res) => setTimeout(res, 100));
    assert.equal(closed, slow.length);
  } finally {
    clearInterval(trickle);
    for (const s of slow) s.destroy();
  }
});

test('without an API key a page can neither post to the server nor rebind a name to it', async () => {
  const text = await post('/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
    { 'content-type': 'text/plain' });
  assert.equal(text.status, 415);
  assert.match(message(text), /Content-Type must be application\/json/);
  const form = await post('/v1/messages', 'a=1', { 'content-type': 'application/x-www-form-urlencoded' });
  assert.equal(form.status, 415);
  assert.equal(form.json.type, 'error');
  const port = new URL(server.url).port;
  const rebound = await rawExchange(`GET /v1/models HTTP/1.1\r\nHost: evil.example:${port}\r\nConnection: close\r\n\r\n`);
  assert.match(rebound, /^HTTP\/1.1 403 /);
  assert.match(rebound, /is not this server's/);
  const local = await rawExchange(`GET /v1/models HTTP/1.1\r\nHost: localhost:${port}\r\nConnection: close\r\n\r\n`);
  assert.match(local, /^HTTP\/1.1 200 /);
  // --allowed-hosts names more; an API key lifts the rules.
  const named = await startServer(['--ctx', '1024', '--allowed-hosts', 'box.lan,other.lan'], 'allowed-hosts');
  const keyed = await startServer(['--ctx', '1024', '--api-key', 'k'], 'keyed');
  try {
    const exchange = (url, h) => new Promise((resolve, reject) => {
      const u = new URL(url);
      const s = net.connect(Number(u.port), u.hostname);
      let got = '';
      s.on('connect', () => s.write(h));
      s.on('data', (d) => (got += d.toString()));
      s.on('close', () => resolve(got));
      s.on('error', reject);
    });
    assert.match(await exchange(named.url, 'GET /health HTTP/1.1\r\nHost: box.lan\r\nConnection: close\r\n\r\n'), /^HTTP\/1.1 200 /);
    assert.match(await exchange(named.url, 'GET /health HTTP/1.1\r\nHost: evil.lan\r\nConnection: close\r\n\r\n'), /^HTTP\/1.1 403 /);
    assert.match(await exchange(keyed.url, 'GET /v1/models HTTP/1.1\r\nHost: evil.lan\r\nx-api-key: k\r\nConnection: close\r\n\r\n'), /^HTTP\/1.1 200 /);
  } finally {
    assert.equal(await named.stop(), 0);
    assert.equal(await keyed.stop(), 0);
  }
});

test('listening beyond loopback without a key is warned about before anything loads', () => {
  // The model does not exist, so nothing binds: the warning comes first.
  const r = spawnSync(process.env.FLASHKV_BIN, ['serve', '--host', '0.0.0.0', '--model', '/nonexistent.gguf'],
    { encoding: 'utf8', timeout: 60000 });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /--host 0\.0\.0\.0 without --api-key: anyone who can reach this address/);
  const quiet = spawnSync(process.env.FLASHKV_BIN, ['serve', '--host', '127.0.0.1', '--model', '/nonexistent.gguf'],
    { encoding: 'utf8', timeout: 60000 });
  assert.doesNotMatch(quiet.stderr, /without --api-key/);
});
