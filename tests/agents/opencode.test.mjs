// The real opencode client end to end against flashkv serve (lib/scenario.mjs).
import { opencode } from './lib/agents.mjs';
import { runAgentScenario } from './lib/scenario.mjs';

runAgentScenario(opencode);
