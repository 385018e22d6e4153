// The Responses API's tool shapes through the official `openai` client (docs/SERVER.md §5.4):
// namespace tool groups, the hosted tool_search tool and replayed hosted items render the
// same prompt as their plain-function equivalents (equal input_tokens), and what cannot be
// served is refused as docs/SERVER.md §5.4 says. The tiny model's output is random, so the
// output side (names and namespaces restored) is covered by tests/server unit tests.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { startServer } from './lib/server.mjs';

let server;
let client;

before(async () => {
  server = await startServer(['--ctx', '4096', '--prefill-chunk', '256'], 'responses-tools');
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

const params = { type: 'object', properties: { path: { type: 'string' } } };
const base = (extra) => ({ model: 'codex', max_output_tokens: 1, reasoning: { effort: 'none' }, ...extra });
const inputTokens = async (req) => (await client.responses.create(base(req))).usage.input_tokens;

test('a namespace group renders like flat "<namespace><name>" function tools', async () => {
  const input = 'Read the config.';
  const grouped = await inputTokens({
    input,
    tools: [{ type: 'namespace', name: 'mcp__fs__', description: 'Files', tools: [
      { type: 'function', name: 'read', description: 'Read a file', parameters: params }] }],
  });
  const flat = await inputTokens({
    input,
    tools: [{ type: 'function', name: 'mcp__fs__read', description: 'Read a file', parameters: params }],
  });
  const unprefixed = await inputTokens({
    input,
    tools: [{ type: 'function', name: 'read', description: 'Read a file', parameters: params }],
  });
  assert.equal(grouped, flat);
  assert.ok(unprefixed < flat, `${unprefixed} < ${flat}`);
});

test('replayed hosted calls and tool_search outputs render as calls, results and new tools', async () => {
  const action = { type: 'exec', command: ['ls', '-l'] };
  const loaded = [{ type: 'namespace', name: 'mcp__fs__', tools: [{ type: 'function', name: 'read', parameters: params }] }];
  const hosted = await inputTokens({
    tools: [{ type: 'tool_search' }],
    input: [
      { role: 'user', content: 'Look around, then find a file tool.' },
      { type: 'local_shell_call', id: 'lsh_1', call_id: 'call_sh', status: 'completed', action },
      { type: 'local_shell_call_output', call_id: 'call_sh', output: 'a.c b.c' },
      { type: 'tool_search_call', call_id: 'call_ts', execution: 'client', arguments: { query: 'files' } },
      { type: 'tool_search_output', call_id: 'call_ts', execution: 'client', tools: loaded },
      { type: 'compaction', encrypted_content: 'opaque' },
    ],
  });
  const plain = await inputTokens({
    tools: [
      { type: 'function', name: 'tool_search', description: 'Search available tools.', parameters: { type: 'object', properties: {} } },
      { type: 'function', name: 'mcp__fs__read', description: '', parameters: params },
    ],
    input: [
      { role: 'user', content: 'Look around, then find a file tool.' },
      { type: 'function_call', call_id: 'call_sh', name: 'local_shell', arguments: JSON.stringify(action) },
      { type: 'function_call_output', call_id: 'call_sh', output: 'a.c b.c' },
      { type: 'function_call', call_id: 'call_ts', name: 'tool_search', arguments: '{"query":"files"}' },
      { type: 'function_call_output', call_id: 'call_ts', output: JSON.stringify(loaded) },
    ],
  });
  assert.equal(hosted, plain);
  // A namespaced function_call item is flattened the same way as its tool.
  const nsCall = await inputTokens({
    tools: loaded,
    input: [{ role: 'user', content: 'go' },
      { type: 'function_call', call_id: 'call_rd', name: 'read', namespace: 'mcp__fs__', arguments: '{"path":"a.c"}' },
      { type: 'function_call_output', call_id: 'call_rd', output: 'int x;' }],
  });
  const flatCall = await inputTokens({
    tools: [{ type: 'function', name: 'mcp__fs__read', description: '', parameters: params }],
    input: [{ role: 'user', content: 'go' },
      { type: 'function_call', call_id: 'call_rd', name: 'mcp__fs__read', arguments: '{"path":"a.c"}' },
      { type: 'function_call_output', call_id: 'call_rd', output: 'int x;' }],
  });
  assert.equal(nsCall, flatCall);
});

test('what the server cannot serve is a 400 with the reason', async () => {
  const cases = [
    [{ input: 'x', previous_response_id: 'resp_1' }, /^400 previous_response_id is not supported; replay full input instead/],
    [{ input: 'x', conversation: 'conv_1' }, /^400 conversation is not supported; replay full input instead/],
    [{ input: 'x', tool_choice: 'required' }, /'tool_choice' forces a tool call but 'tools' is empty/],
    [{ input: 'x', tool_choice: { type: 'function', name: 'f' } }, /'tool_choice.name' forces a tool call but 'tools' is empty/],
    [{ input: 'x', text: { format: { type: 'json_schema', name: 'n', schema: { type: 'string', pattern: 'a' } } } },
      /'text.format.schema': 'pattern' is not supported/],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'data:image/png;base64,AA' }] }] },
      /part type "input_image" is not supported/],
    [{ input: [{ role: 'user', content: 'x' }, { type: 'function_call_output', call_id: 'call_gone', output: 'y' }] },
      /continuation state is not available for call_id call_gone; retry by replaying the full input history/],
    [{ input: [{ type: 'web_search_call', id: 'ws_1', status: 'in_progress', action: {} }] }, /status.*in_progress.*not supported/],
    [{ input: [{ type: 'file_search_call', id: 'fs_1' }] }, /"file_search_call" is not supported/],
  ];
  for (const [req, message] of cases) {
    await assert.rejects(client.responses.create(base(req)), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.message, message);
      return true;
    });
  }
});
