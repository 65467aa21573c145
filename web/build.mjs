// Builds the Sessions page: compiles src/*.ts with tsc and copies static/* beside them.
// Usage: node build.mjs [out-dir]  (default ../src/http/web, the checked-in assets the
// server embeds; a test builds into a temporary folder and compares the two).
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] ?? join(here, '../src/http/web'));
mkdirSync(out, { recursive: true });
execFileSync(process.execPath, [join(here, 'node_modules/typescript/bin/tsc'), '-p', join(here, 'tsconfig.json'), '--outDir', out], {
  stdio: 'inherit',
});
for (const file of readdirSync(join(here, 'static'))) copyFileSync(join(here, 'static', file), join(out, file));
