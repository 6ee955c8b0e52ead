// Manifest validation (node --test): every overlay and variant under k8s/ renders with `kubectl kustomize`,
// parses strictly, passes kubernetes-models' validate() object by object and the zps invariants
// (lib/manifests.mjs); every broken fixture under fixtures/ fails, and for the reason its first line states
// ("# expect: <regular expression>").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { repoRoot, validateDir } from './lib/manifests.mjs';
import { defaultDirs } from './validate.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const rel = (d) => path.relative(repoRoot, d);

const good = [path.join(repoRoot, 'k8s', 'base'), ...defaultDirs()];
for (const dir of good) {
  test(`valid: ${rel(dir)}`, () => {
    const { objects, errors } = validateDir(dir);
    assert.deepEqual(errors, [], `${rel(dir)} should have no errors`);
    assert.ok(objects.length > 0, 'rendered no objects');
  });
}

test('the overlays and variants docs/deployment.md promises exist', () => {
  for (const d of ['overlays/cpu', 'overlays/gpu', 'overlays/recovery', 'overlays/torch', 'variants/mxjob', 'variants/volcano'])
    assert.ok(good.includes(path.join(repoRoot, 'k8s', d)), `k8s/${d} is missing`);
});

test('the cpu overlay runs 1 scheduler, 2 servers and 2 workers', () => {
  const { objects } = validateDir(path.join(repoRoot, 'k8s', 'overlays', 'cpu'));
  const jobs = Object.fromEntries(objects.filter((o) => o.kind === 'Job').map((o) => [o.metadata.name, o.spec]));
  assert.equal(jobs['zps-scheduler'].completions, 1);
  assert.equal(jobs['zps-server'].completions, 2);
  assert.equal(jobs['zps-worker'].completions, 2);
  assert.equal(objects.filter((o) => o.kind === 'Service').length, 3);
});

test('the recovery overlay restarts servers and workers in place, keeps their checkpoints and turns recovery on', () => {
  const { objects } = validateDir(path.join(repoRoot, 'k8s', 'overlays', 'recovery'));
  const env = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('zps-env')).data;
  assert.equal(env.ZPS_RECOVERY, '1');
  assert.equal(env.DMLC_NUM_SERVER, '2');  // the base's values are kept
  const jobs = Object.fromEntries(objects.filter((o) => o.kind === 'Job').map((o) => [o.metadata.name, o.spec]));
  for (const name of ['zps-server', 'zps-worker']) {
    const spec = jobs[name].template.spec;
    assert.equal(spec.restartPolicy, 'OnFailure', name);
    assert.ok(jobs[name].backoffLimit > 0, name);
    const mount = spec.containers[0].volumeMounts.find((m) => m.mountPath === env.ZPS_CHECKPOINT_DIR);
    assert.ok(mount && spec.volumes.some((v) => v.name === mount.name), `${name} mounts ZPS_CHECKPOINT_DIR`);
  }
  // A restarted scheduler would not know the job: it must stay down and end it.
  assert.equal(jobs['zps-scheduler'].template.spec.restartPolicy, 'Never');
});

test('the torch overlay: workers run a PyTorch script from the torch image, the other roles stay zps', () => {
  const { objects } = validateDir(path.join(repoRoot, 'k8s', 'overlays', 'torch'));
  const jobs = Object.fromEntries(objects.filter((o) => o.kind === 'Job').map((o) => [o.metadata.name, o.spec]));
  const worker = jobs['zps-worker'].template.spec.containers[0];
  assert.equal(worker.command[0], 'python3');
  assert.match(worker.command[1], /^\/usr\/share\/zps\/examples\/torch\/train_\w+\.py$/, 'a script the image holds');
  const script = path.join(repoRoot, 'examples', 'torch', path.basename(worker.command[1]));
  assert.ok(fs.existsSync(script), `${rel(script)} (copied into the image) exists`);
  for (const name of ['zps-scheduler', 'zps-server', 'zps-worker']) {
    const c = jobs[name].template.spec.containers[0];
    assert.match(c.image, /-torch$/, `${name} uses the image built with WITH_TORCH=1`);
    if (name !== 'zps-worker') assert.equal(c.command, undefined, `${name} keeps the zps entrypoint`);
  }
  assert.equal(jobs['zps-worker'].completions, 2);
});

const fixturesDir = path.join(here, 'fixtures');
const fixtures = fs.readdirSync(fixturesDir).sort().map((n) => path.join(fixturesDir, n));
test('there are broken fixtures', () => assert.ok(fixtures.length >= 10));
for (const dir of fixtures) {
  const file = ['kustomization.yaml', 'manifest.yaml'].map((f) => path.join(dir, f)).find((f) => fs.existsSync(f));
  test(`broken: ${path.basename(dir)} fails for its reason`, () => {
    assert.ok(file, `${rel(dir)} has neither kustomization.yaml nor manifest.yaml`);
    const m = /^# expect: (.+)$/m.exec(fs.readFileSync(file, 'utf8'));
    assert.ok(m, `${rel(file)} has no "# expect: <regex>" line`);
    const expect = new RegExp(m[1].trim());
    const { errors } = validateDir(dir);
    assert.ok(errors.length > 0, `${rel(dir)} passed validation but must fail: ${m[1]}`);
    assert.ok(errors.some((e) => expect.test(e)),
      `${rel(dir)} failed, but not for its reason /${m[1]}/; errors:\n  ${errors.join('\n  ')}`);
  });
}
