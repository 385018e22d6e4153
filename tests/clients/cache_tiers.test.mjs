// The resume cascade across tiers: a restart (SIGTERM, start again) turns the live session
// into a disk hit; several sessions live side by side; an evicted session comes back from
// RAM, or from disk without a RAM tier, with the same greedy answer from every tier;
// /metrics counts prompt tokens by source and lookups per tier.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { longSystem, metric, startServer, tempDir } from './lib/server.mjs';

const openai = (server) => new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
const chat = (messages) => ({ model: 'm', messages, thinking: false, temperature: 0, max_tokens: 8 });

test('after a restart the same conversation is a disk hit', async () => {
  const args = ['--ctx', '4096', '--kv-disk-dir', tempDir('kv-restart'), '--kv-cache-min-tokens', '64'];
  let server = await startServer(args, 'restart-a');
  let client = openai(server);
  const messages = [
    { role: 'system', content: longSystem(30) },
    { role: 'user', content: 'Describe a lighthouse.' },
  ];
  const first = await client.chat.completions.create(chat(messages));
  messages.push(first.choices[0].message, { role: 'user', content: 'And its keeper?' });
  assert.equal(await server.stop('SIGTERM'), 0);
  assert.match(server.logText(), /shutdown snapshot of session/);

  server = await startServer(args, 'restart-b');
  client = openai(server);
  const { data: second, response } = await client.chat.completions.create(chat(messages)).withResponse();
  assert.match(response.headers.get('x-flashkv-cache'), /^disk; reused=\d+; prompt=\d+; restore_ms=[0-9.]+; match=disk-/);
  assert.equal(second.usage.prompt_tokens_details.cached_tokens, first.usage.prompt_tokens + 7);
  assert.equal(await metric(server.url, 'flashkv_cache_lookups_total', 'tier="disk",result="hit"'), 1);
  assert.equal(await metric(server.url, 'flashkv_prompt_tokens_total', 'source="disk"'),
    second.usage.prompt_tokens_details.cached_tokens);
  assert.ok((await metric(server.url, 'flashkv_disk_bytes')) > 0);
  assert.ok((await metric(server.url, 'flashkv_disk_entries')) >= 1);

  // From here on the conversation is live again.
  messages.push(second.choices[0].message, { role: 'user', content: 'Thanks.' });
  const { response: r3 } = await client.chat.completions.create(chat(messages)).withResponse();
  assert.match(r3.headers.get('x-flashkv-cache'), /^live; /);
  assert.equal(await server.stop(), 0);
});

test('an Anthropic thinking conversation survives a restart too', async () => {
  const args = ['--ctx', '4096', '--kv-disk-dir', tempDir('kv-anthropic'), '--kv-cache-min-tokens', '64'];
  let server = await startServer(args, 'restart-c');
  const make = (s) => new Anthropic({ baseURL: s.url, apiKey: 'unused', maxRetries: 0 });
  const req = (messages) => ({
    model: 'claude', max_tokens: 8, thinking: { type: 'enabled', budget_tokens: 2000 },
    system: [{ type: 'text', text: 'x-anthropic-billing-header: cch=1' }, { type: 'text', text: longSystem(30) }],
    messages,
  });
  const messages = [{ role: 'user', content: 'Plan a trip.' }];
  const first = await make(server).messages.create(req(messages));
  assert.equal(first.content[0].type, 'thinking');
  // Claude Code sends the thinking block back; the template drops old reasoning, and the
  // snapshot is filed under that visible text.
  messages.push({ role: 'assistant', content: first.content }, { role: 'user', content: 'Cheaper?' });
  assert.equal(await server.stop(), 0);
  server = await startServer(args, 'restart-d');
  const { data, response } = await make(server).messages.create(req(messages)).withResponse();
  assert.match(response.headers.get('x-flashkv-cache'), /^disk; /);
  const firstPrompt = first.usage.cache_creation_input_tokens + first.usage.cache_read_input_tokens;
  assert.equal(data.usage.cache_read_input_tokens, firstPrompt + 7);
  assert.equal(await server.stop(), 0);
});

test('a third unrelated session does not destroy the first one\'s reuse', async () => {
  const server = await startServer(['--ctx', '4096'], 'three-sessions');
  const client = openai(server);
  const convo = (topic) => [{ role: 'system', content: longSystem(10) }, { role: 'user', content: `Tell me about ${topic}.` }];
  const a = convo('apples');
  const b = convo('boats');
  const c = convo('clouds');
  const ra = await client.chat.completions.create(chat(a));
  await client.chat.completions.create(chat(b));
  await client.chat.completions.create(chat(c));
  a.push(ra.choices[0].message, { role: 'user', content: 'More.' });
  const { data, response } = await client.chat.completions.create(chat(a)).withResponse();
  assert.match(response.headers.get('x-flashkv-cache'), /^live; /);
  assert.equal(data.usage.prompt_tokens_details.cached_tokens, ra.usage.prompt_tokens + 7);
  assert.equal(await metric(server.url, 'flashkv_live_evictions_total'), 0);
  assert.equal(await metric(server.url, 'flashkv_live_sessions'), 3);
  assert.equal(await metric(server.url, 'flashkv_cache_lookups_total', 'tier="live",result="hit"'), 1);
  assert.equal(await metric(server.url, 'flashkv_cache_lookups_total', 'tier="live",result="miss"'), 3);
  assert.equal(await metric(server.url, 'flashkv_prompt_tokens_total', 'source="live"'),
    data.usage.prompt_tokens_details.cached_tokens);
  assert.ok((await metric(server.url, 'flashkv_prefill_tokens_per_second')) > 0);
  assert.ok((await metric(server.url, 'flashkv_decode_tokens_per_second')) > 0);
  assert.equal(await server.stop(), 0);
});

// One conversation: a first turn, an unrelated request (which evicts it when the server
// keeps one live session), then the second turn. Returns the second turn's reply and
// cache header.
async function secondTurn(server, { evict }) {
  const client = openai(server);
  const a = [{ role: 'system', content: longSystem(20) }, { role: 'user', content: 'First conversation.' }];
  const ra = await client.chat.completions.create(chat(a));
  if (evict) {
    await client.chat.completions.create(chat([{ role: 'user', content: 'An unrelated question about trains and their many timetables.' }]));
  }
  a.push(ra.choices[0].message, { role: 'user', content: 'Continue.' });
  const { data, response } = await client.chat.completions.create(chat(a)).withResponse();
  return { first: ra, data, header: response.headers.get('x-flashkv-cache'), messages: a };
}

test('with one live slot an evicted session comes back from disk', async () => {
  const server = await startServer(['--ctx', '4096', '--kv-live-sessions', '1', '--kv-ram-space-mb', '0',
    '--kv-disk-dir', tempDir('kv-evict'), '--kv-cache-min-tokens', '64'], 'evict');
  const { first, data, header } = await secondTurn(server, { evict: true });
  assert.match(header, /^disk; reused=\d+; prompt=\d+; restore_ms=[0-9.]+; match=disk-(text|token); bytes=\d+$/);
  assert.equal(data.usage.prompt_tokens_details.cached_tokens, first.usage.prompt_tokens + 7);
  assert.equal(await metric(server.url, 'flashkv_live_evictions_total'), 2);
  assert.ok((await metric(server.url, 'flashkv_disk_saves_total', 'result="ok"')) >= 1);
  assert.ok((await metric(server.url, 'flashkv_restore_bytes_total', 'tier="disk"')) > 0);
  assert.equal(await server.stop(), 0);
});

test('with one live slot an evicted session comes back from RAM, without touching the disk', async () => {
  const server = await startServer(['--ctx', '4096', '--kv-live-sessions', '1', '--kv-ram-space-mb', '256',
    '--kv-cache-min-tokens', '64'], 'evict-ram');
  const { first, data, header } = await secondTurn(server, { evict: true });
  assert.match(header, /^ram; reused=\d+; prompt=\d+; restore_ms=[0-9.]+; match=ram-(text|token); bytes=(\d+)$/);
  const bytes = Number(header.match(/bytes=(\d+)/)[1]);
  assert.equal(data.usage.prompt_tokens_details.cached_tokens, first.usage.prompt_tokens + 7);
  assert.equal(await metric(server.url, 'flashkv_cache_lookups_total', 'tier="ram",result="hit"'), 1);
  assert.equal(await metric(server.url, 'flashkv_prompt_tokens_total', 'source="ram"'),
    data.usage.prompt_tokens_details.cached_tokens);
  assert.equal(await metric(server.url, 'flashkv_restore_bytes_total', 'tier="ram"'), bytes);
  assert.ok((await metric(server.url, 'flashkv_ram_transfer_bytes_total', 'direction="out"')) >= bytes);
  assert.ok((await metric(server.url, 'flashkv_ram_entries')) >= 1);
  assert.ok((await metric(server.url, 'flashkv_ram_bytes')) <= 256 * 1024 * 1024);
  assert.equal(await server.stop(), 0);
});

test('the greedy second turn is byte-identical from the live, RAM and disk tiers and cold', async () => {
  const runs = [
    { name: 'tier-live', args: ['--kv-live-sessions', '2'], evict: false, tier: /^live; / },
    { name: 'tier-ram', args: ['--kv-live-sessions', '1', '--kv-ram-space-mb', '256', '--kv-cache-min-tokens', '64'],
      evict: true, tier: /^ram; / },
    { name: 'tier-disk', args: ['--kv-live-sessions', '1', '--kv-ram-space-mb', '0', '--kv-disk-dir', tempDir('kv-identical'),
      '--kv-cache-min-tokens', '64'], evict: true, tier: /^disk; / },
  ];
  const replies = [];
  let messages;
  for (const run of runs) {
    const server = await startServer(['--ctx', '4096', ...run.args], run.name);
    try {
      const turn = await secondTurn(server, { evict: run.evict });
      assert.match(turn.header, run.tier, run.name);
      replies.push(turn.data.choices[0].message.content);
      messages = turn.messages;
    } finally {
      assert.equal(await server.stop(), 0);
    }
  }
  // The same second-turn prompt prefilled from token 0 on a server with no snapshots.
  const cold = await startServer(['--ctx', '4096', '--kv-ram-space-mb', '0'], 'tier-cold');
  const { data, response } = await openai(cold).chat.completions.create(chat(messages)).withResponse();
  assert.match(response.headers.get('x-flashkv-cache'), /^none; /);
  replies.push(data.choices[0].message.content);
  assert.equal(await cold.stop(), 0);
  assert.ok(replies[0].length > 0);
  for (const r of replies) assert.equal(r, replies[0]);
});

// A server-written snapshot filed under a visible key (the thinking turn without its
// reasoning) carries a resume tail (the pending ids the text covers). `flashkv run` goes
// through the same resume step as the server: a text match continues with that tail, so
// the effective prompt is the snapshot's ids plus the tail.
test('flashkv run resumes a visible-key snapshot with its pending tail', async () => {
  const dir = tempDir('kv-run-visible');
  const args = ['--ctx', '4096', '--kv-disk-dir', dir, '--kv-cache-min-tokens', '64'];
  const server = await startServer(args, 'run-visible');
  const anthropic = new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
  const first = await anthropic.messages.create({
    model: 'claude', max_tokens: 8, thinking: { type: 'enabled', budget_tokens: 2000 },
    system: longSystem(30), messages: [{ role: 'user', content: 'Plan a trip.' }],
  });
  assert.equal(first.content[0].type, 'thinking');
  assert.equal(await server.stop(), 0);

  const bin = process.env.FLASHKV_BIN;
  const model = process.env.FLASHKV_MODEL;
  const tailTag = 0x31414b56;  // 'VKA1', little-endian
  let text = null;
  let tailIds = 0;
  for (const name of fs.readdirSync(dir).filter((n) => n.endsWith('.kv'))) {
    const show = spawnSync(bin, ['kv', 'show', '--dir', dir, name.slice(0, 12)]);
    assert.equal(show.status, 0, show.stderr.toString());
    const out = show.stdout;
    const tail = out.toString().match(new RegExp(`kind 6 tag ${tailTag} +offset +\\d+ bytes +(\\d+)`));
    if (!tail) continue;
    const head = out.toString('latin1').match(/text \((\d+) bytes\):\n/);
    const start = head.index + head[0].length;  // latin1: one char per byte
    text = out.subarray(start, start + Number(head[1])).toString();
    tailIds = Number(tail[1]) / 4;
  }
  assert.ok(text !== null, 'the shutdown snapshot should be filed under a visible key with a tail');
  assert.ok(tailIds > 0);

  const run = spawnSync(bin, ['run', '--model', model, '--raw', '-n', '4', '--ctx', '4096', '--kv-disk-dir', dir,
    '--kv-cache-min-tokens', '64', '-p', text]);
  const err = run.stderr.toString();
  assert.equal(run.status, 0, err);
  const m = err.match(/kv: prefix from disk: (\d+) of (\d+) tokens reused \(matched by text\)/);
  assert.ok(m, err);
  assert.equal(Number(m[2]) - Number(m[1]), tailIds, 'the tail ids are evaluated after the snapshot');
  assert.match(err, new RegExp(`prefill: ${tailIds} tokens in`));
});
