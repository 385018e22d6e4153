// One real coding agent against `flashkv serve` on the tiny model, end to end: a new
// session, its continuation, another new session, a server restart, the continuation of
// that session (from the snapshot saved at shutdown), a new session. The
// agent runs headless in a scratch HOME configured by its README block, its API traffic
// goes through a recording proxy, and HTTP(S)_PROXY points at a trap that refuses and
// records any attempt to leave the machine. Every request must get a 2xx, every reply's
// usage must equal its x-flashkv-cache header, each turn's first request must hit the
// tier it should (continue: live; new session: the disk anchor; after the restart: disk,
// for the continuation more than the anchor), and the trap must stay empty.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { startServer, tempDir } from '../../clients/lib/server.mjs';
import { isGeneration } from './agents.mjs';
import { EgressTrap } from './egress_trap.mjs';
import { readmeBlock } from './readme_blocks.mjs';
import { parseCacheHeader, Recorder, reportedUsage } from './recorder.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BIN_DIR = path.resolve(HERE, '../node_modules/.bin');

// The context the README's configurations declare and CI serves.
export const CTX = 100000;
// One agent command may take this long (a cold Claude Code prompt is ~12k tokens).
const COMMAND_TIMEOUT_MS = 300000;

// `beyond`: the turn whose reused count this one must exceed (the shutdown snapshot of a
// session, not just the anchor every session starts with).
const TURNS = [
  { name: 'new session', kind: 'new', prompt: 'Say hi.', tier: 'none' },
  { name: 'continue', kind: 'continue', prompt: 'Say more.', tier: 'live' },
  { name: 'second new session', kind: 'new', prompt: 'Name a colour.', tier: 'disk' },
  { name: 'continue after restart', kind: 'continue', prompt: 'And another.', tier: 'disk',
    restartFirst: true, beyond: 2 },
  { name: 'new session after restart', kind: 'new', prompt: 'Name a number.', tier: 'disk' },
];

function agentEnv(home, trapUrl, extra) {
  const env = {
    HOME: home,
    PATH: [path.join(home, '.local/bin'), BIN_DIR, '/usr/local/bin', '/usr/bin', '/bin'].join(':'),
    TERM: 'dumb',
    LANG: 'C.UTF-8',
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_DATA_HOME: path.join(home, '.local/share'),
    XDG_CACHE_HOME: path.join(home, '.cache'),
    XDG_STATE_HOME: path.join(home, '.local/state'),
    NO_PROXY: '127.0.0.1,localhost',
    no_proxy: '127.0.0.1,localhost',
    ...extra,
  };
  for (const k of ['HTTPS_PROXY', 'HTTP_PROXY', 'ALL_PROXY', 'https_proxy', 'http_proxy', 'all_proxy']) {
    env[k] = trapUrl;
  }
  return env;
}

function runCommand(argv, env, cwd, log) {
  return new Promise((resolve) => {
    const child = spawn(argv[0], argv.slice(1), { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), COMMAND_TIMEOUT_MS);
    child.on('error', (e) => { stderr += String(e); });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      fs.appendFileSync(log, `$ ${argv.join(' ')}\nexit ${code} ${signal ?? ''}\n--- stdout\n${stdout}\n--- stderr\n${stderr}\n\n`);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

function describe(ex) {
  return `${ex.method} ${ex.path} -> ${ex.status} [${ex.cache ?? 'no x-flashkv-cache'}]`;
}

// Checks one turn's exchanges; returns the tier its first own request hit.
function checkTurn(agent, turn, exchanges) {
  assert.ok(exchanges.length > 0, `${turn.name}: the agent sent no request`);
  for (const ex of exchanges) {
    assert.ok(ex.status >= 200 && ex.status < 300,
      `${turn.name}: ${describe(ex)}: ${ex.error ?? ex.response.slice(0, 400)}`);
    if (!isGeneration(ex)) continue;
    const cache = parseCacheHeader(ex.cache);
    assert.ok(cache, `${turn.name}: ${describe(ex)} has no x-flashkv-cache header`);
    const usage = reportedUsage(ex);
    assert.ok(usage, `${turn.name}: ${describe(ex)} reported no usage`);
    assert.deepEqual({ prompt: usage.prompt, cached: usage.cached },
      { prompt: cache.prompt, cached: cache.reused },
      `${turn.name}: ${describe(ex)}: usage ${JSON.stringify(usage.raw)} disagrees with its header`);
  }
  const own = exchanges.filter((ex) => agent.isTurnRequest(ex));
  assert.ok(own.length > 0, `${turn.name}: no request of the turn itself among ${exchanges.map(describe).join(', ')}`);
  return parseCacheHeader(own[0].cache);
}

export function runAgentScenario(agent) {
  test(`${agent.name}: new session, continue, new session, restart, continue, new session`, { timeout: 1400000 }, async () => {
    const [major, minor] = process.versions.node.split('.').map(Number);
    assert.ok(major > 20 || (major === 20 && minor >= 6),
      `the agents need Node >= 20.6 (Pi's requirement); this is ${process.versions.node}`);
    const bin = path.join(BIN_DIR, agent.bin);
    if (!fs.existsSync(bin)) {
      throw new Error(`${agent.bin} is not installed (${bin}): run scripts/agents-npm-deps.sh`);
    }
    const root = tempDir(`agent-${agent.name}`);
    const home = path.join(root, 'home');
    const work = path.join(root, 'work');
    const kv = path.join(root, 'kv');
    const log = path.join(root, 'agent.log');
    for (const d of [home, work, kv]) fs.mkdirSync(d, { recursive: true });

    const trap = new EgressTrap();
    const recorder = new Recorder();
    const trapUrl = await trap.listen();
    const proxyUrl = await recorder.listen();
    const serverArgs = ['--ctx', String(CTX), '--kv-disk-dir', kv, ...(agent.serverArgs ?? [])];
    let server = await startServer(serverArgs, `agent-${agent.name}`);
    recorder.upstream = server.url;
    try {
      // The README's block, with the proxy's address and CI's few changes.
      let setup = readmeBlock(agent.readme);
      assert.ok(setup.includes(String(CTX)), `the README's ${agent.name} block must declare a ${CTX}-token context (--ctx ${CTX})`);
      assert.ok(setup.includes('http://127.0.0.1:8000'), `the README's ${agent.name} block has no http://127.0.0.1:8000`);
      setup = setup.replaceAll('http://127.0.0.1:8000', proxyUrl);
      for (const [from, to] of agent.replace) {
        assert.ok(setup.includes(from), `the README's ${agent.name} block has no ${from}`);
        setup = setup.replaceAll(from, to);
      }
      const env = agentEnv(home, trapUrl, agent.env);
      const configured = spawnSync('sh', ['-eu'], { input: setup, env, cwd: home, encoding: 'utf8' });
      assert.equal(configured.status, 0, `the README's ${agent.name} block failed: ${configured.stderr}`);

      const seen = [];
      const tiers = [];
      for (const turn of TURNS) {
        if (turn.restartFirst) {
          assert.equal(await server.stop(), 0, `server exit code; see ${server.log}`);
          server = await startServer(serverArgs, `agent-${agent.name}`);
          recorder.upstream = server.url;
        }
        const mark = recorder.exchanges.length;
        const argv = turn.kind === 'new' ? agent.newSession(turn.prompt) : agent.continueSession(turn.prompt);
        const run = await runCommand(argv, env, work, log);
        const exchanges = recorder.since(mark);
        const tier = checkTurn(agent, turn, exchanges);
        seen.push(`${turn.name}: ${exchanges.map(describe).join('; ')}`);
        assert.ok(run.code === 0 || agent.endedAtCap(run),
          `${turn.name}: ${argv.join(' ')} exited ${run.code} ${run.signal ?? ''}; see ${log}\n${run.stderr.slice(-2000)}`);
        assert.equal(tier.source, turn.tier,
          `${turn.name}: the turn's first request should hit ${turn.tier}:\n${seen.join('\n')}`);
        if (turn.tier === 'disk' || turn.tier === 'live') assert.ok(tier.reused > 0);
        if (turn.beyond !== undefined) {
          assert.ok(tier.reused > tiers[turn.beyond].reused,
            `${turn.name}: restored ${tier.reused} tokens, no more than the anchor ${TURNS[turn.beyond].name} had:\n${seen.join('\n')}`);
        }
        tiers.push(tier);
      }
      assert.deepEqual(trap.attempts, [], `${agent.name} tried to leave the machine`);
    } finally {
      fs.writeFileSync(path.join(root, 'exchanges.json'), JSON.stringify(recorder.exchanges, null, 1));
      await server.stop();
      await recorder.close();
      await trap.close();
    }
  });
}
