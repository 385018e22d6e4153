// The real pi client end to end against flashkv serve (lib/scenario.mjs).
import { pi } from './lib/agents.mjs';
import { runAgentScenario } from './lib/scenario.mjs';

runAgentScenario(pi);
