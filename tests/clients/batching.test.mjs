// Continuous batching (issue 18) end to end: concurrent streaming clients of one `flashkv
// serve` share its forward steps and still get exactly the greedy tokens they get alone (a
// --max-batch 1 server, one request at a time, is the reference), with one stream cancelled
// in the batch, a long prompt arriving mid-stream, and admission under --kv-live-sessions 1
// and 2 (the others wait in the queue; no step ever holds more sessions than the pool).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { longSystem, metric, startServer } from './lib/server.mjs';

const common = ['--ctx', '2048', '--prefill-chunk', '32', '--kv-ram-space-mb', '0'];
let alone;

before(async () => {
  alone = await startServer([...common, '--max-batch', '1', '--kv-live-sessions', '1'], 'batch-alone');
});
after(async () => {
  assert.equal(await alone.stop(), 0);
});

const ask = (who, words = 6) => {
  const w = [];
  for (let i = 0; i < words; i++) w.push(`river${(who * 7 + i) % 13}`);
  return [{ role: 'user', content: `Client ${who} asks: ${w.join(' ')}` }];
};

// One streaming chat completion: the reply's text as streamed. `onDelta(n)` after each
// content delta may return true to abort the stream there (the reply is then cut).
async function stream(url, messages, maxTokens, onDelta = () => false) {
  const ac = new AbortController();
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: maxTokens, thinking: false, temperature: 0, stream: true }),
    signal: ac.signal,
  });
  assert.equal(r.status, 200);
  let text = '';
  let deltas = 0;
  let aborted = false;
  let buf = '';
  const dec = new TextDecoder();
  try {
    for await (const part of r.body) {
      buf += dec.decode(part, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, nl);
        buf = buf.slice(nl + 2);
        if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
        const d = JSON.parse(ev.slice(6)).choices?.[0]?.delta;
        if (d?.content) {
          text += d.content;
          if (onDelta(++deltas)) {
            aborted = true;
            ac.abort();
            return { text, aborted };
          }
        }
      }
    }
  } catch (e) {
    if (e.name !== 'AbortError') throw e;
  }
  return { text, aborted };
}

async function aloneText(messages, maxTokens) {
  return (await stream(alone.url, messages, maxTokens)).text;
}

async function waitFor(fn, ms = 20000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

test('concurrent streams get their alone tokens; a cancelled one and a long prompt disturb no other', async () => {
  const server = await startServer([...common, '--max-batch', '8', '--kv-live-sessions', '6'], 'batch-8');
  try {
    const reqs = [ask(1), ask(2, 12), ask(3, 3), ask(4, 20)];
    const want = [];
    for (const m of reqs) want.push(await aloneText(m, 24));
    assert.ok(want.every((t) => t.length > 0), 'every reference reply has text');
    const got = await Promise.all(reqs.map((m) => stream(server.url, m, 24)));
    assert.deepEqual(got.map((g) => g.text), want);

    // One long stream leaves after its first delta while three others run beside it, and a
    // ~1000-token prompt arrives once the first of them streams.
    const cancelledBefore = (await metric(server.url, 'flashkv_requests_total', 'outcome="cancelled"')) ?? 0;
    const longMessages = [{ role: 'system', content: longSystem(40) }, { role: 'user', content: 'Summarise.' }];
    const wantLong = await aloneText(longMessages, 8);
    const others = [ask(5), ask(6, 9), ask(7, 4)];
    const wantOthers = [];
    for (const m of others) wantOthers.push(await aloneText(m, 40));
    assert.ok(wantLong.length > 0 && wantOthers.every((t) => t.length > 0));
    let longRun = null;
    const runs = [
      stream(server.url, [{ role: 'user', content: 'Talk forever.' }], 1000, () => true),
      ...others.map((m, i) =>
        stream(server.url, m, 40, () => {
          if (i === 0 && longRun === null) longRun = stream(server.url, longMessages, 8);
          return false;
        })),
    ];
    const [cut, ...rest] = await Promise.all(runs);
    assert.equal(cut.aborted, true);
    assert.deepEqual(rest.map((g) => g.text), wantOthers);
    assert.ok(longRun, 'the long prompt was sent');
    assert.equal((await longRun).text, wantLong);
    assert.ok(await waitFor(async () =>
      (await metric(server.url, 'flashkv_requests_total', 'outcome="cancelled"')) === cancelledBefore + 1));
    assert.ok(await waitFor(async () => (await metric(server.url, 'flashkv_active_requests')) === 0));
    const steps = await metric(server.url, 'flashkv_batch_steps_total');
    const sessions = await metric(server.url, 'flashkv_batch_sessions_total');
    assert.ok(steps > 0 && sessions >= steps, `${sessions} sessions in ${steps} steps`);
    assert.ok((await metric(server.url, 'flashkv_inter_token_gaps_total')) > 0);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

for (const live of [1, 2]) {
  test(`admission under --kv-live-sessions ${live}: the others wait, every stream gets its alone tokens`, async () => {
    const server = await startServer([...common, '--max-batch', '8', '--kv-live-sessions', String(live)], `batch-live${live}`);
    try {
      const reqs = [ask(10 + live), ask(20 + live, 10), ask(30 + live, 5)];
      const want = [];
      for (const m of reqs) want.push(await aloneText(m, 16));
      assert.ok(want.every((t) => t.length > 0), 'every reference reply has text');
      const got = await Promise.all(reqs.map((m) => stream(server.url, m, 16)));
      assert.deepEqual(got.map((g) => g.text), want);
      const steps = await metric(server.url, 'flashkv_batch_steps_total');
      const sessions = await metric(server.url, 'flashkv_batch_sessions_total');
      assert.ok(sessions <= live * steps, `${sessions} sessions in ${steps} steps with ${live} live`);
      assert.equal(await metric(server.url, 'flashkv_requests_total', 'outcome="ok"'), reqs.length);
    } finally {
      assert.equal(await server.stop(), 0);
    }
  });
}
