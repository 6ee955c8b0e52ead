#!/usr/bin/env node
// Validates zps manifests: `node tests/k8s/validate.mjs DIR...` (a kustomization or a folder of YAML).
// With no argument: every overlay and variant under k8s/. Prints one line per error and
// "N passed, N failed"; exits 1 when any directory has an error.
import path from 'node:path';
import fs from 'node:fs';
import { repoRoot, validateDir } from './lib/manifests.mjs';

export function defaultDirs() {
  const dirs = [];
  for (const group of ['overlays', 'variants']) {
    const g = path.join(repoRoot, 'k8s', group);
    for (const d of fs.readdirSync(g).sort()) dirs.push(path.join(g, d));
  }
  return dirs;
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('validate.mjs')) {
  const dirs = process.argv.length > 2 ? process.argv.slice(2).map((d) => path.resolve(d)) : defaultDirs();
  let passed = 0, failed = 0;
  for (const dir of dirs) {
    const { objects, errors } = validateDir(dir);
    const name = path.relative(process.cwd(), dir) || dir;
    if (errors.length === 0 && objects.length > 0) {
      passed++;
      console.log(`ok   ${name}: ${objects.length} objects (${objects.map((o) => o.kind).join(', ')})`);
    } else {
      failed++;
      console.log(`FAIL ${name}:`);
      for (const e of errors.length ? errors : ['no objects']) console.log(`     ${e}`);
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
