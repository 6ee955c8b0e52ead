// Dockerfile checks (node --test): npm dockerfile-utils lints it with no error and no warning (and rejects a
// broken one), plus what the deployment issue requires of the file and no linter checks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { repoRoot, requireFromModules } from './lib/manifests.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const dockerfile = path.join(repoRoot, 'Dockerfile');
const lintBin = path.join(path.dirname(requireFromModules.resolve('dockerfile-utils/package.json')), 'bin', 'dockerfile-utils');
const lint = (file) => spawnSync(process.execPath, [lintBin, 'lint', file], { encoding: 'utf8' });

// Instructions with continuation lines joined and comments dropped.
const instructions = (text) => text.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))
  .map((l) => ({ op: l.split(/\s+/)[0].toUpperCase(), rest: l.slice(l.split(/\s+/)[0].length).trim() }));

test('dockerfile-utils lint: the Dockerfile has no error and no warning', () => {
  const r = lint(dockerfile);
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.equal((r.stdout + r.stderr).trim(), '', 'lint printed diagnostics');
});

test('dockerfile-utils lint rejects a broken Dockerfile', () => {
  const r = lint(path.join(here, 'docker', 'broken.Dockerfile'));
  assert.equal(r.status, 1);
  assert.match(r.stdout, /Unknown instruction: FRM/);
  assert.match(r.stdout, /Invalid proto: tcpp/);
});

test('multi-stage, ARG BASE before FROM ${BASE}, built with tools/install-deps.sh', () => {
  const ins = instructions(fs.readFileSync(dockerfile, 'utf8'));
  const firstFrom = ins.findIndex((i) => i.op === 'FROM');
  const globalArgs = ins.slice(0, firstFrom).filter((i) => i.op === 'ARG').map((i) => i.rest.split('=')[0]);
  assert.ok(globalArgs.includes('BASE'), 'ARG BASE must come before the first FROM');
  const froms = ins.filter((i) => i.op === 'FROM');
  assert.ok(froms.length >= 2, 'a build stage and a runtime stage');
  assert.match(froms[froms.length - 1].rest, /^\$\{?BASE\}?(\s|$)/, 'the runtime stage is FROM ${BASE}');
  const stages = froms.map((f) => / AS (\S+)/i.exec(f.rest)?.[1]).filter(Boolean);
  for (const c of ins.filter((i) => i.op === 'COPY' && /--from=/.test(i.rest)))
    assert.ok(stages.includes(/--from=(\S+)/.exec(c.rest)[1]), `COPY ${c.rest} names an unknown stage`);
  const build = ins.slice(firstFrom, ins.indexOf(froms[1]));
  assert.ok(build.some((i) => i.op === 'RUN' && i.rest.includes('tools/install-deps.sh')), 'the build stage runs tools/install-deps.sh');
});

test('the runtime stage: slim, non-root, ENTRYPOINT ["zps"]', () => {
  const ins = instructions(fs.readFileSync(dockerfile, 'utf8'));
  const last = ins.slice(ins.map((i) => i.op).lastIndexOf('FROM'));
  const runs = last.filter((i) => i.op === 'RUN').map((i) => i.rest).join('\n');
  assert.doesNotMatch(runs, /build-essential|cmake|-dev\b|install-deps/, 'no build tools in the runtime stage');
  assert.match(runs, /--no-install-recommends/);
  assert.match(runs, /rm -rf \/var\/lib\/apt\/lists/);
  const users = last.filter((i) => i.op === 'USER');
  assert.equal(users.length, 1, 'one USER in the runtime stage');
  assert.match(users[0].rest, /^[1-9]\d*(:\d+)?$/, 'USER is a numeric non-root uid (runAsNonRoot can verify it)');
  const eps = last.filter((i) => i.op === 'ENTRYPOINT');
  assert.equal(eps.length, 1);
  assert.deepEqual(JSON.parse(eps[0].rest), ['zps']);
  assert.equal(last.filter((i) => i.op === 'CMD').length, 0, 'no CMD: the role comes from DMLC_ROLE, programs from args');
});

test('.dockerignore keeps build trees, .git and node_modules out of the context', () => {
  const lines = fs.readFileSync(path.join(repoRoot, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim());
  for (const p of ['.git', 'build', 'build-*', '**/node_modules']) assert.ok(lines.includes(p), `.dockerignore lacks ${p}`);
});
