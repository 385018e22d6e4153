// The real codex client end to end against flashkv serve (lib/scenario.mjs).
import { codex } from './lib/agents.mjs';
import { runAgentScenario } from './lib/scenario.mjs';

runAgentScenario(codex);
