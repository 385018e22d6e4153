// Bad input and hostile clients: each gets a clear error in its API's shape or a correct
// answer, and the server stays up with no leaked sessions or requests — malformed JSON,
// wrong types, unknown models, empty messages, oversized bodies, prompts beyond --ctx,
// invalid UTF-8, deep nesting, the API key, clients vanishing mid-stream and mid-prefill,
// 16 concurrent clients, and keepalives during a long single-chunk prefill.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { getJson, longSystem, metric, startServer } from './lib/server.mjs';

let server;

before(async () => {
  server = await startServer(['--ctx', '2048', '--max-body-mb', '1', '--prefill-chunk', '64'], 'robust');
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

const openaiError = (r, status, pattern) => {
  assert.equal(r.status, status, r.text);
  assert.equal(typeof r.json.error.message, 'string');
  assert.match(r.json.error.message, pattern);
  assert.equal(r.json.error.type, status === 404 ? 'not_found_error' : 'invalid_request_error');
};

test('malformed JSON, wrong types and empty messages are 400s that say what is wrong', async () => {
  openaiError(await post('/v1/chat/completions', '{"messages": ['), 400, /invalid JSON body: parse error/);
  openaiError(await post('/v1/chat/completions', '[1,2]'), 400, /must be a JSON object/);
  openaiError(await post('/v1/chat/completions', '{"messages": "hi"}'), 400, /'messages' must be a non-empty array/);
  openaiError(await post('/v1/chat/completions', '{"messages": []}'), 400, /'messages' must be a non-empty array/);
  openaiError(await post('/v1/chat/completions', '{"messages": [{"content": "x"}], "max_tokens": "x"}'), 400, /'max_tokens' must be a number/);
  openaiError(await post('/v1/chat/completions', '{"messages": [{"role": 7}]}'), 400, /'role' must be a string/);
  openaiError(await post('/v1/completions', '{"prompt": {"a": 1}}'), 400, /'prompt' must be a string/);
  openaiError(await post('/v1/responses', '{"input": "x", "previous_response_id": "r"}'), 400, /previous_response_id is not supported; replay full input instead/);
  const deep = '{"messages": ' + '['.repeat(300) + ']'.repeat(300) + '}';
  openaiError(await post('/v1/chat/completions', deep), 400, /nesting deeper than 256/);
  const a = await post('/v1/messages', '{"messages": [], "max_tokens": 5}');
  assert.equal(a.status, 400);
  assert.equal(a.json.type, 'error');
  assert.equal(a.json.error.type, 'invalid_request_error');
});

test('invalid UTF-8 in a request is refused', async () => {
  const body = Buffer.concat([
    Buffer.from('{"messages":[{"role":"user","content":"bad '),
    Buffer.from([0xff, 0xfe, 0xc3]),
    Buffer.from('"}]}'),
  ]);
  const r = await post('/v1/chat/completions', body);
  openaiError(r, 400, /invalid JSON body/);
});

test('unknown model ids are 404; any model name is accepted for generation', async () => {
  const r = await getJson(`${server.url}/v1/models/gpt-4`);
  assert.equal(r.status, 404);
  assert.equal(r.body.error.code, 'model_not_found');
  const g = await post('/v1/chat/completions', JSON.stringify({
    model: 'some-agent-default', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, thinking: false,
  }));
  assert.equal(g.status, 200);
  assert.equal(g.json.model, 'some-agent-default');
  const nf = await post('/v1/nothing', '{}');
  assert.equal(nf.status, 404);
  assert.match(nf.json.error.message, /unknown endpoint POST \/v1\/nothing/);
});

test('oversized bodies get 413 in each API\'s shape', async () => {
  const big = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(1100000) }] });
  const r = await post('/v1/chat/completions', big);
  assert.equal(r.status, 413);
  assert.match(r.json.error.message, /exceeds the limit of 1048576 bytes/);
  const a = await post('/v1/messages', big);
  assert.equal(a.status, 413);
  assert.equal(a.json.error.type, 'request_too_large');
});

test('prompts beyond --ctx are refused with the token counts', async () => {
  const content = 'word '.repeat(2500);
  const r = await post('/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content }] }));
  assert.equal(r.status, 400);
  assert.equal(r.json.error.code, 'context_length_exceeded');
  assert.equal(r.json.error.param, 'messages');
  assert.equal(r.json.error.n_ctx, 2048);
  assert.ok(r.json.error.n_prompt_tokens > 2048);
  assert.match(r.json.error.message, /^Prompt has \d+ tokens, but the configured context size is 2048 tokens$/);
  const client = new Anthropic({ baseURL: server.url, apiKey: 'x', maxRetries: 0 });
  await assert.rejects(client.messages.create({ model: 'c', max_tokens: 4, messages: [{ role: 'user', content }] }),
    (e) => e.status === 400 && e.error.error.type === 'invalid_request_error' && e.error.error.n_ctx === 2048);
});

// Reads a streaming response until `until(received)` holds, then destroys the socket.
function vanishAfter(path, body, until) {
  return new Promise((resolve, reject) => {
    const u = new URL(server.url);
    const req = http.request({ host: u.hostname, port: u.port, path, method: 'POST',
      headers: { 'content-type': 'application/json' } }, (res) => {
      let got = '';
      res.on('data', (d) => {
        got += d.toString();
        if (until(got, res)) {
          req.destroy();
          resolve({ status: res.statusCode, got });
        }
      });
      res.on('error', () => {});
    });
    req.on('error', (e) => (e.code === 'ECONNRESET' ? null : reject(e)));
    req.end(JSON.stringify(body));
  });
}

async function waitFor(fn, ms = 10000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

test('a client vanishing mid-stream or mid-prefill cancels its work; the server carries on', async () => {
  const cancelledBefore = (await metric(server.url, 'flashkv_requests_total', 'outcome="cancelled"')) ?? 0;
  // Mid-decode: the model would generate ~2000 tokens; the client leaves after the first delta.
  const r = await vanishAfter('/v1/chat/completions',
    { messages: [{ role: 'user', content: 'Talk forever.' }], stream: true, thinking: false },
    (got) => got.includes('"content":"') && got.indexOf('data:', got.indexOf('"content":"')) > 0);
  assert.equal(r.status, 200);
  assert.ok(await waitFor(async () =>
    (await metric(server.url, 'flashkv_requests_total', 'outcome="cancelled"')) === cancelledBefore + 1));

  // Mid-prefill: a ~1500-token prompt in 64-token chunks; the client leaves once the
  // headers arrive (the worker has started), so the prefill stops early.
  const prefilledBefore = await metric(server.url, 'flashkv_prefill_tokens_total');
  const system = longSystem(100);
  await vanishAfter('/v1/messages',
    { model: 'c', max_tokens: 50, stream: true, system, messages: [{ role: 'user', content: 'hi' }] },
    (got) => got.includes('message_start'));
  assert.ok(await waitFor(async () =>
    (await metric(server.url, 'flashkv_requests_total', 'outcome="cancelled"')) === cancelledBefore + 2));
  const prefilled = (await metric(server.url, 'flashkv_prefill_tokens_total')) - prefilledBefore;
  const count = await new Anthropic({ baseURL: server.url, apiKey: 'x' }).messages.countTokens(
    { model: 'c', system, messages: [{ role: 'user', content: 'hi' }] });
  assert.ok(prefilled < count.input_tokens, `prefilled ${prefilled} of ${count.input_tokens}`);

  // Non-streaming: the client aborts while the request runs.
  const ac = new AbortController();
  const pending = fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST', signal: ac.signal, headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Go on and on.' }], thinking: false }),
  }).catch((e) => e);
  await new Promise((r) => setTimeout(r, 300));
  ac.abort();
  await pending;
  assert.ok(await waitFor(async () =>
    (await metric(server.url, 'flashkv_requests_total', 'outcome="cancelled"')) === cancelledBefore + 3));

  // The worker is free again: a short request is answered promptly.
  const t0 = Date.now();
  const ok = await post('/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }));
  assert.equal(ok.status, 200);
  assert.ok(Date.now() - t0 < 5000);
});

test('16 concurrent clients all get correct answers and nothing leaks', async () => {
  const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const anthropic = new Anthropic({ baseURL: server.url, apiKey: 'x', maxRetries: 0 });
  const jobs = [];
  for (let i = 0; i < 16; i++) {
    const content = `Client ${i} asks about the number ${i * 7}.`;
    if (i % 4 === 0) {
      jobs.push(anthropic.messages.create({ model: 'c', max_tokens: 4, thinking: { type: 'disabled' },
        messages: [{ role: 'user', content }] }).then((m) => {
        assert.equal(m.type, 'message');
        assert.equal(m.usage.output_tokens, 4);
      }));
    } else if (i % 4 === 1) {
      jobs.push(openai.responses.create({ model: 'x', input: content, max_output_tokens: 4 }).then((r) => {
        assert.equal(r.usage.output_tokens, 4);
      }));
    } else {
      jobs.push((async () => {
        const s = await openai.chat.completions.create({ model: 'x', stream: true, max_tokens: 4, thinking: false,
          temperature: 0, stream_options: { include_usage: true }, messages: [{ role: 'user', content }] });
        let usage = null;
        for await (const c of s) if (c.usage) usage = c.usage;
        assert.equal(usage.completion_tokens, 4);
      })());
    }
  }
  await Promise.all(jobs);
  const h = await getJson(`${server.url}/health`);
  assert.equal(h.status, 200);
  assert.equal(h.body.queue_depth, 0);
  assert.equal(h.body.active_requests, 0);
  assert.ok(h.body.live_sessions <= 4);
  assert.equal(await metric(server.url, 'flashkv_queue_depth'), 0);
});

test('the API key guards everything but /health', async () => {
  const guarded = await startServer(['--api-key', 'k3y', '--ctx', '1024'], 'apikey');
  try {
    const r = await fetch(`${guarded.url}/v1/models`);
    assert.equal(r.status, 401);
    assert.match((await r.json()).error.message, /missing or invalid API key/);
    assert.equal((await fetch(`${guarded.url}/health`)).status, 200);
    const client = new OpenAI({ baseURL: `${guarded.url}/v1`, apiKey: 'k3y', maxRetries: 0 });
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    assert.equal(ids.length, 1);
    const anthropic = new Anthropic({ baseURL: guarded.url, apiKey: 'k3y', maxRetries: 0 });
    const m = await anthropic.messages.create({ model: 'c', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] });
    assert.equal(m.type, 'message');
    const wrong = new Anthropic({ baseURL: guarded.url, apiKey: 'nope', maxRetries: 0 });
    await assert.rejects(wrong.messages.create({ model: 'c', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }),
      (e) => e.status === 401 && e.error.error.type === 'authentication_error');
  } finally {
    assert.equal(await guarded.stop(), 0);
  }
});

// The interval is shortened to 250 ms so that the test does not depend on how fast this
// machine prefills: any prefill of a few hundred ms must already show several keepalives.
test('keepalive comments arrive on time during a long one-chunk prefill', async () => {
  const slow = await startServer(['--ctx', '8192', '--prefill-chunk', '100000', '--sse-keepalive-ms', '250'],
    'keepalive');
  try {
    const u = new URL(slow.url);
    const arrivals = [];
    let firstData = null;
    await new Promise((resolve, reject) => {
      const req = http.request({ host: u.hostname, port: u.port, path: '/v1/chat/completions', method: 'POST',
        headers: { 'content-type': 'application/json' } }, (res) => {
        res.on('data', (d) => {
          const now = Date.now();
          const s = d.toString();
          arrivals.push({ t: now, s });
          if (firstData === null && s.includes('"delta":{"content"')) firstData = now;
        });
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end(JSON.stringify({ stream: true, max_tokens: 2, thinking: false,
        messages: [{ role: 'system', content: longSystem(400) }, { role: 'user', content: 'hi' }] }));
    });
    const start = arrivals[0].t;
    const prefillMs = (firstData ?? arrivals.at(-1).t) - start;
    const comments = arrivals.filter((a) => a.s.includes(': prefill')).length;
    let maxGap = 0;
    for (let i = 1; i < arrivals.length; i++) maxGap = Math.max(maxGap, arrivals[i].t - arrivals[i - 1].t);
    assert.ok(prefillMs > 750, `prefill took only ${prefillMs} ms; the test needs a longer prompt`);
    // Half the nominal count leaves room for a loaded machine's scheduling.
    assert.ok(comments >= Math.floor(prefillMs / 500), `${comments} keepalives in ${prefillMs} ms`);
    assert.ok(maxGap < 1500, `a ${maxGap} ms gap without bytes`);
    // Each prefill comment carries llama.cpp's prompt_progress numbers for this request.
    const progress = arrivals.flatMap((a) => [...a.s.matchAll(/^: prefill (\{.*\})$/gm)])
      .map((m) => JSON.parse(m[1]));
    assert.equal(progress.length, comments);
    let lastMs = -1;
    for (const p of progress) {
      assert.ok(p.total > 0 && p.total === progress[0].total, JSON.stringify(p));
      assert.ok(p.cache >= 0 && p.cache <= p.processed && p.processed <= p.total, JSON.stringify(p));
      assert.ok(p.time_ms >= lastMs, JSON.stringify(p));
      lastMs = p.time_ms;
    }
  } finally {
    assert.equal(await slow.stop(), 0);
  }
});
