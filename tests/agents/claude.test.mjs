// The real claude client end to end against flashkv serve (lib/scenario.mjs).
import { claude } from './lib/agents.mjs';
import { runAgentScenario } from './lib/scenario.mjs';

runAgentScenario(claude);
