// The Node targets' build step (run by the harness from the workspace root): checks that
// targets/node/node_modules holds exactly what package-lock.json pins, so a run never uses
// stale or missing libraries. It installs nothing: `npm ci --prefix targets/node` does.

import { existsSync, readFileSync } from 'node:fs';

const root = new URL('../', import.meta.url);
const fix = 'run `npm ci --prefix targets/node` (from the workspace root)';
const [major, minor] = process.versions.node.split('.').map(Number);
const problems = [];

// ioredis 6 needs Node 20; cookie 2 (via fastify → light-my-request) is ESM-only and is
// loaded with require(esm), on by default from Node 20.19.
if (major < 20 || (major === 20 && minor < 19)) {
  problems.push(`Node ${process.versions.node} is too old: the Node targets need Node >= 20.19`);
}

const lock = JSON.parse(readFileSync(new URL('package-lock.json', root), 'utf8'));
const installed = existsSync(new URL('node_modules', root));
if (!installed) problems.push('targets/node/node_modules is missing');
for (const [path, entry] of installed ? Object.entries(lock.packages ?? {}) : []) {
  if (path === '' || entry.dev || entry.optional || entry.link) continue;
  const manifest = new URL(`${path}/package.json`, root);
  if (!existsSync(manifest)) {
    problems.push(`${path} is not installed (package-lock.json pins ${entry.version})`);
    continue;
  }
  const version = JSON.parse(readFileSync(manifest, 'utf8')).version;
  if (version !== entry.version) {
    problems.push(`${path} is ${version}, package-lock.json pins ${entry.version}`);
  }
}

if (problems.length > 0) {
  for (const p of problems.slice(0, 10)) process.stderr.write(`targets/node: ${p}\n`);
  if (problems.length > 10) process.stderr.write(`targets/node: … and ${problems.length - 10} more\n`);
  process.stderr.write(`targets/node: ${fix}\n`);
  process.exit(1);
}
