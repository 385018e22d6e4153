// The agent configurations CI runs are the README's: each is the fenced block right after
// a `<!-- agents-ci: NAME -->` marker in README.md, a shell script that writes the agent's
// configuration under $HOME. Reading them from the README keeps the documented setup and
// the tested one the same text.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const README = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../README.md');

export function readmeBlock(name, readme = fs.readFileSync(README, 'utf8')) {
  const marker = `<!-- agents-ci: ${name} -->`;
  const at = readme.indexOf(marker);
  if (at < 0) throw new Error(`README.md has no ${marker}`);
  const open = readme.indexOf('```', at + marker.length);
  const bodyStart = readme.indexOf('\n', open) + 1;
  const close = readme.indexOf('\n```', bodyStart);
  if (open < 0 || bodyStart <= 0 || close < 0) {
    throw new Error(`README.md: no fenced block after ${marker}`);
  }
  if (readme.indexOf(marker, at + 1) >= 0) throw new Error(`README.md has ${marker} twice`);
  return readme.slice(bodyStart, close + 1);
}
