// flashkv serve driven by the official `@anthropic-ai/sdk` client, the way Claude Code uses
// it: system blocks with a per-request billing header, thinking blocks, streamed messages,
// tool_use / tool_result round trips and Anthropic's cache usage fields.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { longSystem, startServer } from './lib/server.mjs';

let server;
let client;

before(async () => {
  server = await startServer(['--ctx', '4096'], 'anthropic');
  client = new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

// Claude Code's shape: a billing header block that differs on every request, then the
// real system prompt.
const system = (nonce) => [
  { type: 'text', text: `x-anthropic-billing-header: cc_version=2.0; cch=${nonce}` },
  { type: 'text', text: longSystem(25), cache_control: { type: 'ephemeral' } },
];
const base = (extra) => ({
  model: 'claude-sonnet-4-5', max_tokens: 8, temperature: 0, thinking: { type: 'disabled' }, ...extra,
});

test('a message has the Anthropic shape and cache usage fields', async () => {
  const { data, response } = await client.messages
    .create(base({ messages: [{ role: 'user', content: 'Hello there' }] }))
    .withResponse();
  assert.equal(data.type, 'message');
  assert.equal(data.role, 'assistant');
  assert.match(data.id, /^msg_[0-9a-f]{32}$/);
  assert.equal(data.model, 'claude-sonnet-4-5');
  assert.equal(data.content[0].type, 'text');
  assert.equal(data.stop_reason, 'max_tokens');
  assert.equal(data.stop_sequence, null);
  assert.equal(data.usage.output_tokens, 8);
  assert.equal(data.usage.input_tokens, 0);
  assert.equal(data.usage.cache_read_input_tokens, 0);
  assert.ok(data.usage.cache_creation_input_tokens > 3);
  assert.match(response.headers.get('x-flashkv-cache'), /^none; /);
});

test('the per-request billing header does not break reuse across turns', async () => {
  const messages = [{ role: 'user', content: 'Summarise the rules.' }];
  const first = await client.messages.create(base({ system: system('aaa111'), messages }));
  messages.push({ role: 'assistant', content: first.content }, { role: 'user', content: 'Shorter please.' });
  const { data: second, response } = await client.messages
    .create(base({ system: system('bbb222'), messages }))
    .withResponse();
  const firstPrompt = first.usage.cache_creation_input_tokens + first.usage.cache_read_input_tokens;
  assert.equal(second.usage.cache_read_input_tokens, firstPrompt + 7);
  assert.ok(second.usage.cache_creation_input_tokens < 20);
  assert.match(response.headers.get('x-flashkv-cache'), /^live; /);
});

test('count_tokens agrees with the prompt a message request uses', async () => {
  const req = { model: 'claude', system: system('ccc'), messages: [{ role: 'user', content: 'Count me.' }] };
  const counted = await client.messages.countTokens(req);
  const made = await client.messages.create(base(req));
  assert.equal(counted.input_tokens, made.usage.cache_creation_input_tokens + made.usage.cache_read_input_tokens);
});

test('streamed message with thinking: blocks, signature, usage and the final message', async () => {
  const stream = client.messages.stream({
    model: 'claude', max_tokens: 12, thinking: { type: 'enabled', budget_tokens: 1024 },
    system: system('ddd'), messages: [{ role: 'user', content: 'Think, then answer.' }],
  });
  const types = [];
  let thinking = '';
  stream.on('streamEvent', (ev) => {
    types.push(ev.type);
    if (ev.type === 'content_block_delta' && ev.delta.type === 'thinking_delta') thinking += ev.delta.thinking;
  });
  const msg = await stream.finalMessage();
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
  assert.ok(types.includes('message_delta'));
  // A random model never closes </think>: all reasoning, and no (empty) text block that a
  // client would replay.
  assert.equal(msg.content.length, 1);
  assert.equal(msg.content[0].type, 'thinking');
  assert.equal(msg.content[0].thinking, thinking);
  assert.equal(msg.content[0].signature, msg.id);
  assert.equal(msg.stop_reason, 'max_tokens');
  assert.equal(msg.usage.output_tokens, 12);
});

test('tool_use and tool_result round-trip through rendering and reuse', async () => {
  const tools = [{ name: 'read_file', description: 'Read a file', input_schema: { type: 'object', properties: { path: { type: 'string' } } } }];
  const messages = [
    { role: 'user', content: 'Open README.md' },
    { role: 'assistant', content: [
      { type: 'text', text: 'Reading it.' },
      { type: 'tool_use', id: 'toolu_client_1', name: 'read_file', input: { path: 'README.md' } },
    ] },
    { role: 'user', content: [
      { type: 'tool_result', tool_use_id: 'toolu_client_1', content: '# flashkv\nmake run' },
      { type: 'text', text: '<system-reminder>stay focused</system-reminder>' },
    ] },
  ];
  const first = await client.messages.create(base({ system: system('eee'), tools, messages }));
  assert.ok(['max_tokens', 'end_turn', 'tool_use'].includes(first.stop_reason));
  messages.push({ role: 'assistant', content: first.content }, { role: 'user', content: 'Thanks.' });
  const second = await client.messages.create(base({ system: system('fff'), tools, messages }));
  const firstPrompt = first.usage.cache_creation_input_tokens + first.usage.cache_read_input_tokens;
  assert.ok(second.usage.cache_read_input_tokens >= firstPrompt);
});

test('bad requests come back in the Anthropic error shape', async () => {
  await assert.rejects(
    client.messages.create({ model: 'claude', max_tokens: 8, messages: [] }),
    (e) => e.status === 400 && e.error?.type === 'error' && e.error?.error?.type === 'invalid_request_error' &&
      /'messages' must be a non-empty array/.test(e.error.error.message),
  );
  await assert.rejects(
    client.messages.create({ model: 'claude', max_tokens: 'many', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e.status === 400 && /'max_tokens' must be a number/.test(e.error.error.message),
  );
});
