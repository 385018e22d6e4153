// How CI drives each real coding agent headless: the README block that configures it, the
// few values CI changes in it (README "The server and coding agents" says which and why),
// the command lines of a new session and of a continuation, which of its requests are the
// turn's own (not a title or side request), and how the agent reports a reply that hit the
// output cap.
//
// The tiny test model writes random text: it never samples EOS and never closes </think>
// within a few dozen tokens, so every reply ends at the output cap. Pi and opencode end
// such a turn normally; Claude Code (after its max_tokens recovery requests) and Codex end
// it with an error that names the cap, which counts as the turn ending as expected.

// The cap on every reply, small so a turn of random text is quick.
export const OUTPUT_CAP = 48;

const isGeneration = (ex) =>
  ex.method === 'POST' && /^\/v1\/(messages|chat\/completions|responses|completions)(\?|$)/.test(ex.path);
const hasTools = (ex) => Array.isArray(ex.json?.tools) && ex.json.tools.length > 0;

export const claude = {
  name: 'claude',
  bin: 'claude',
  readme: 'claude',
  // Claude Code drops a reply that is only thinking, so with the random model its sessions
  // could never continue: CI turns thinking off (no `thinking`, no effort, and the
  // deepseek-chat model name, which flashkv serves without thinking).
  replace: [['deepseek-v4-flash', 'deepseek-chat']],
  env: {
    CLAUDE_CODE_MAX_OUTPUT_TOKENS: String(OUTPUT_CAP),
    CLAUDE_CODE_DISABLE_THINKING: '1',
    CLAUDE_CODE_EFFORT_LEVEL: 'unset',
  },
  newSession: (prompt) => ['claude-flashkv', '-p', prompt, '--output-format', 'json', '--max-turns', '2'],
  continueSession: (prompt) =>
    ['claude-flashkv', '-p', '--continue', prompt, '--output-format', 'json', '--max-turns', '2'],
  isTurnRequest: (ex) => isGeneration(ex) && hasTools(ex),
  endedAtCap(run) {
    try {
      return run.code === 1 && JSON.parse(run.stdout).api_error === 'max_output_tokens';
    } catch {
      return false;
    }
  },
};

export const codex = {
  name: 'codex',
  bin: 'codex',
  readme: 'codex',
  replace: [],
  env: {},
  // Codex sends no output limit: `flashkv serve --tokens` caps it.
  serverArgs: ['--tokens', String(OUTPUT_CAP)],
  newSession: (prompt) => ['codex', 'exec', '--skip-git-repo-check', prompt],
  continueSession: (prompt) => ['codex', 'exec', '--skip-git-repo-check', 'resume', '--last', prompt],
  isTurnRequest: (ex) => isGeneration(ex) && hasTools(ex),
  endedAtCap: (run) =>
    run.code === 1 && run.stderr.includes('Incomplete response returned, reason: max_output_tokens'),
};

export const pi = {
  name: 'pi',
  bin: 'pi',
  readme: 'pi',
  replace: [['"maxTokens": 32768', `"maxTokens": ${OUTPUT_CAP}`]],
  env: {},
  // Pi drops a reply that is only thinking, like Claude Code: thinking off.
  newSession: (prompt) => ['pi', '-p', '--thinking', 'off', prompt],
  continueSession: (prompt) => ['pi', '-p', '--continue', '--thinking', 'off', prompt],
  isTurnRequest: (ex) => isGeneration(ex) && hasTools(ex),
  endedAtCap: () => false,
};

export const opencode = {
  name: 'opencode',
  bin: 'opencode',
  readme: 'opencode',
  replace: [['"output": 32768', `"output": ${OUTPUT_CAP}`]],
  env: {},
  // opencode resends a thinking-only reply's reasoning_content: thinking stays on.
  newSession: (prompt) => ['opencode-flashkv', 'run', prompt],
  continueSession: (prompt) => ['opencode-flashkv', 'run', '--continue', prompt],
  // Its session-title request has no tools.
  isTurnRequest: (ex) => isGeneration(ex) && hasTools(ex),
  endedAtCap: () => false,
};

export { isGeneration };
