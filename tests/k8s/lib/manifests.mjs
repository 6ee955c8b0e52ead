// Shared by the manifest validation (manifests.test.mjs, validate.mjs) and the pod simulation (podsim.mjs):
// rendering a kustomization, parsing YAML strictly, schema validation with kubernetes-models, the zps
// invariants, and resolving a container's environment the way the kubelet does.
//
// npm packages come from $ZPS_K8S_NODE_MODULES (a folder holding node_modules/, set by ctest to the build
// tree) or else from this folder's parent (tests/k8s/node_modules after `npm ci` there).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..', '..', '..');
const modulesDir = process.env.ZPS_K8S_NODE_MODULES || path.resolve(here, '..');
export const requireFromModules = createRequire(path.join(modulesDir, 'package.json'));
const YAML = requireFromModules('yaml');

// ---------------------------------------------------------------------------------------------------
// Rendering and parsing

export function isKustomization(dir) {
  return ['kustomization.yaml', 'kustomization.yml', 'Kustomization'].some((f) => fs.existsSync(path.join(dir, f)));
}

// The YAML text of a directory: `kubectl kustomize DIR` for a kustomization, else its *.yaml files.
export function renderDir(dir) {
  if (isKustomization(dir)) {
    try {
      return execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60000 });
    } catch (e) {
      const why = (e.stderr || e.message || '').toString().trim();
      throw new Error(`kubectl kustomize ${dir} failed: ${why}`);
    }
  }
  return fs.readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).sort()
    .map((f) => fs.readFileSync(path.join(dir, f), 'utf8')).join('\n---\n');
}

// Every document of a YAML stream; syntax errors and duplicate keys are errors.
export function parseDocs(text, source = 'input') {
  const objects = [];
  const errors = [];
  for (const doc of YAML.parseAllDocuments(text, { uniqueKeys: true })) {
    for (const e of doc.errors) errors.push(`${source}: YAML: ${e.message.split('\n')[0]}`);
    if (doc.errors.length) continue;
    const obj = doc.toJS();
    if (obj === null || obj === undefined) continue;
    if (typeof obj !== 'object' || Array.isArray(obj)) {
      errors.push(`${source}: a document is not a mapping`);
      continue;
    }
    objects.push(obj);
  }
  return { objects, errors };
}

export const ref = (o) => `${o?.kind ?? '?'}/${o?.metadata?.name ?? '?'}`;

// ---------------------------------------------------------------------------------------------------
// Schema validation (kubernetes-models) of every object, and of the pod templates inside custom resources

const MODEL_PATHS = {
  'v1/ConfigMap': 'kubernetes-models/v1/ConfigMap',
  'v1/Secret': 'kubernetes-models/v1/Secret',
  'v1/Service': 'kubernetes-models/v1/Service',
  'v1/Namespace': 'kubernetes-models/v1/Namespace',
  'v1/ServiceAccount': 'kubernetes-models/v1/ServiceAccount',
  'v1/Pod': 'kubernetes-models/v1/Pod',
  'v1/PodTemplate': 'kubernetes-models/v1/PodTemplate',
  'batch/v1/Job': 'kubernetes-models/batch/v1/Job',
  'apps/v1/StatefulSet': 'kubernetes-models/apps/v1/StatefulSet',
  'apps/v1/Deployment': 'kubernetes-models/apps/v1/Deployment',
  'networking.k8s.io/v1/NetworkPolicy': 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy',
};

function modelClass(apiVersion, kind) {
  const p = MODEL_PATHS[`${apiVersion}/${kind}`];
  if (!p) return null;
  return requireFromModules(p)[kind];
}

function schemaErrors(Cls, obj, label) {
  try {
    new Cls(obj).validate();
    return [];
  } catch (e) {
    if (!Array.isArray(e.errors)) return [`${label}: ${e.message}`];
    return e.errors.map((x) => {
      const extra = x.params?.allowedValues ? ` (${x.params.allowedValues.join(', ')})` : '';
      return `${label}: ${x.instancePath || '/'} ${x.message}${extra}`;
    });
  }
}

function validatePodTemplate(template, label) {
  const PodTemplate = modelClass('v1', 'PodTemplate');
  return schemaErrors(PodTemplate, { apiVersion: 'v1', kind: 'PodTemplate', metadata: { name: 'x' }, template }, label)
    .map((e) => e.replace(': /template', ': template'));
}

const isInt = (v) => Number.isInteger(v);

export function schemaCheck(obj) {
  const label = ref(obj);
  if (typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string') return [`${label}: no apiVersion/kind`];
  if (!obj.metadata?.name) return [`${label}: metadata.name is missing`];
  if (obj.apiVersion === 'kubeflow.org/v1' && obj.kind === 'MXJob') {
    const errs = [];
    const specs = obj.spec?.mxReplicaSpecs;
    if (!specs || typeof specs !== 'object') return [`${label}: spec.mxReplicaSpecs is missing`];
    for (const [type, rs] of Object.entries(specs)) {
      if (!['Scheduler', 'Server', 'Worker'].includes(type)) errs.push(`${label}: unknown replica type ${type}`);
      if (!isInt(rs?.replicas)) errs.push(`${label}: mxReplicaSpecs.${type}.replicas must be an integer`);
      errs.push(...validatePodTemplate(rs?.template ?? {}, `${label} ${type}`));
    }
    return errs;
  }
  if (obj.apiVersion === 'batch.volcano.sh/v1alpha1' && obj.kind === 'Job') {
    const errs = [];
    if (!isInt(obj.spec?.minAvailable)) errs.push(`${label}: spec.minAvailable must be an integer`);
    if (!Array.isArray(obj.spec?.tasks)) return [...errs, `${label}: spec.tasks is missing`];
    for (const t of obj.spec.tasks) {
      if (typeof t.name !== 'string') errs.push(`${label}: a task has no name`);
      if (!isInt(t.replicas)) errs.push(`${label}: task ${t.name}: replicas must be an integer`);
      errs.push(...validatePodTemplate(t.template ?? {}, `${label} task ${t.name}`));
    }
    return errs;
  }
  const Cls = modelClass(obj.apiVersion, obj.kind);
  if (!Cls) return [`${label}: unknown kind ${obj.apiVersion}/${obj.kind} (the validator knows ${Object.keys(MODEL_PATHS).join(', ')}, MXJob and Volcano Job)`];
  return schemaErrors(Cls, obj, label);
}

// ---------------------------------------------------------------------------------------------------
// Environment resolution

// The static environment of a container as the manifests define it: envFrom ConfigMaps first, then env
// (which wins). Values that only exist at run time (fieldRef, resourceFieldRef) resolve through `ctx`
// when given (pod simulation), else they are kept as {dynamic: source}.
// `secrets` (optional) maps Secret names to objects; a Secret that is not there is skipped when the reference
// is optional (as the kubelet does) and is a problem otherwise.
export function containerEnv(container, configMaps, ctx = null, secrets = new Map()) {
  const env = new Map();
  const problems = [];
  for (const from of container.envFrom ?? []) {
    if (from.configMapRef) {
      const cm = configMaps.get(from.configMapRef.name);
      if (!cm) {
        if (!from.configMapRef.optional) problems.push(`envFrom ConfigMap ${from.configMapRef.name} does not exist`);
        continue;
      }
      for (const [k, v] of Object.entries(cm.data ?? {})) env.set((from.prefix ?? '') + k, v);
    } else if (from.secretRef) {
      const secret = secrets.get(from.secretRef.name);
      if (!secret) {
        if (!from.secretRef.optional)
          problems.push(`envFrom Secret ${from.secretRef.name} is not part of the manifests and not optional: the pods cannot start until it exists`);
        continue;
      }
      for (const [k, v] of Object.entries(secret.stringData ?? {})) env.set((from.prefix ?? '') + k, v);
      for (const [k, v] of Object.entries(secret.data ?? {})) env.set((from.prefix ?? '') + k, Buffer.from(v, 'base64').toString('utf8'));
    } else {
      problems.push(`envFrom ${JSON.stringify(from)} is not supported by this tool`);
    }
  }
  for (const e of container.env ?? []) {
    if ('value' in e) {
      env.set(e.name, e.value);
    } else if (e.valueFrom?.configMapKeyRef) {
      const { name, key, optional } = e.valueFrom.configMapKeyRef;
      const v = configMaps.get(name)?.data?.[key];
      if (v === undefined) {
        if (!optional) problems.push(`env ${e.name}: ConfigMap ${name} has no key ${key}`);
      } else env.set(e.name, v);
    } else if (e.valueFrom?.fieldRef) {
      const fp = e.valueFrom.fieldRef.fieldPath;
      if (ctx) {
        const v = ctx.field(fp);
        if (v === undefined) problems.push(`env ${e.name}: fieldPath ${fp} is not known to the simulation`);
        else env.set(e.name, v);
      } else env.set(e.name, { dynamic: fp });
    } else if (e.valueFrom) {
      if (ctx) problems.push(`env ${e.name}: ${Object.keys(e.valueFrom)[0]} is not supported by the simulation`);
      else env.set(e.name, { dynamic: Object.keys(e.valueFrom)[0] });
    } else {
      env.set(e.name, '');
    }
  }
  return { env, problems };
}

// $(VAR) expansion as the kubelet does it for env values, command and args; $$ escapes.
export function expandRefs(s, env) {
  return String(s).replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (m, name) => {
    if (m === '$$') return '$';
    const v = env.get(name);
    return typeof v === 'string' ? v : m;
  });
}

// ---------------------------------------------------------------------------------------------------
// Invariants: what no schema checks and where a PS job really breaks

const ROLES = ['scheduler', 'server', 'worker'];

export const matches = (selector, labels) =>
  selector && Object.keys(selector).length > 0 &&
  Object.entries(selector).every(([k, v]) => (labels ?? {})[k] === v);

const staticValue = (env, name) => (typeof env.get(name) === 'string' ? env.get(name).trim() : undefined);
const isHeadless = (svc) => svc.spec?.clusterIP === 'None';

function quantityPositive(q) {
  if (q === undefined || q === null) return false;
  const n = parseFloat(String(q));
  return Number.isFinite(n) && n > 0;
}

// Checks shared by every pod template that runs a zps role.
function checkPodTemplate(label, role, tpl, container, env, errs, { allowedRestart }) {
  const spec = tpl?.spec ?? {};
  if (!allowedRestart.includes(spec.restartPolicy))
    errs.push(`${label}: restartPolicy ${spec.restartPolicy ?? '(unset)'}; a job's pods must use ${allowedRestart.join(' or ')}`);
  for (const c of spec.containers ?? []) {
    if (typeof c.image !== 'string' || c.image.trim() === '') errs.push(`${label}: container ${c.name} has no image`);
    for (const e of c.env ?? [])
      if ('value' in e && typeof e.value !== 'string') errs.push(`${label}: env ${e.name} value ${JSON.stringify(e.value)} is not a string`);
    const r = c.resources ?? {};
    if (!r.requests || !quantityPositive(r.requests.cpu) || !quantityPositive(r.requests.memory))
      errs.push(`${label}: container ${c.name} needs resources.requests for cpu and memory`);
    if (!r.limits || !quantityPositive(r.limits.memory))
      errs.push(`${label}: container ${c.name} needs resources.limits (at least memory)`);
    const gpus = r.limits?.['nvidia.com/gpu'] ?? r.requests?.['nvidia.com/gpu'];
    if (gpus !== undefined && quantityPositive(gpus)) {
      if (role !== 'worker') errs.push(`${label}: ${role} requests nvidia.com/gpu; GPUs go only on workers`);
      const shm = (c.volumeMounts ?? []).find((m) => m.mountPath === '/dev/shm');
      const vol = shm && (spec.volumes ?? []).find((v) => v.name === shm.name);
      if (!vol || vol.emptyDir?.medium !== 'Memory')
        errs.push(`${label}: container ${c.name} requests nvidia.com/gpu but does not mount /dev/shm from an emptyDir with medium Memory (64 MiB /dev/shm breaks NCCL)`);
      if (!(spec.tolerations ?? []).some((t) => t.key === 'nvidia.com/gpu' || (t.operator === 'Exists' && !t.key)))
        errs.push(`${label}: GPU pod has no toleration for the nvidia.com/gpu taint`);
    }
  }
  const role_ = staticValue(env, 'DMLC_ROLE');
  if (role_ !== undefined && !ROLES.includes(role_))
    errs.push(`${label}: DMLC_ROLE='${role_}' is not a role (scheduler, server or worker)`);
  if (role === 'server' || role === 'worker') {
    const nh = env.get('DMLC_NODE_HOST');
    if (!nh || nh.dynamic !== 'status.podIP') errs.push(`${label}: DMLC_NODE_HOST must come from fieldRef status.podIP (the address peers connect to)`);
  }
  if (role === 'scheduler') {
    const cmd = container.readinessProbe?.exec?.command ?? [];
    if (!cmd.includes('probe')) errs.push(`${label}: the scheduler needs a readinessProbe that runs zps probe`);
  }
}

// Which role a container runs: its DMLC_ROLE, or (operators) the replica type.
function roleContainer(tpl, configMaps, preferName) {
  const containers = tpl?.spec?.containers ?? [];
  const c = (preferName && containers.find((x) => x.name === preferName)) ||
    containers.find((x) => containerEnv(x, configMaps).env.has('DMLC_ROLE')) || containers[0];
  return c;
}

function checkNative(objs, errs) {
  const configMaps = new Map(objs.filter((o) => o.kind === 'ConfigMap').map((o) => [o.metadata.name, o]));
  for (const cm of configMaps.values())
    for (const [k, v] of Object.entries(cm.data ?? {}))
      if (typeof v !== 'string') errs.push(`${ref(cm)}: data.${k} value ${JSON.stringify(v)} is not a string`);
  const services = objs.filter((o) => o.apiVersion === 'v1' && o.kind === 'Service');
  const jobs = objs.filter((o) => o.apiVersion === 'batch/v1' && o.kind === 'Job');
  const roles = {};  // role -> [{job, container, env}]
  const templates = [];
  for (const job of jobs) {
    const label = ref(job);
    const tpl = job.spec?.template ?? {};
    templates.push({ owner: job, tpl });
    const c = roleContainer(tpl, configMaps);
    if (!c) {
      errs.push(`${label}: no containers`);
      continue;
    }
    const { env, problems } = containerEnv(c, configMaps);
    problems.forEach((p) => errs.push(`${label}: ${p}`));
    const role = staticValue(env, 'DMLC_ROLE');
    if (role === undefined) {
      errs.push(`${label}: container ${c.name} sets no DMLC_ROLE (scheduler, server or worker)`);
      continue;
    }
    checkPodTemplate(label, role, tpl, c, env, errs, { allowedRestart: ['Never', 'OnFailure'] });
    if (!ROLES.includes(role)) continue;
    (roles[role] ??= []).push({ job, tpl, container: c, env });
    const sel = job.spec?.selector?.matchLabels;
    if (sel && !matches(sel, tpl.metadata?.labels)) errs.push(`${label}: spec.selector does not match the template labels`);
    const completions = job.spec?.completions ?? 1;
    const parallelism = job.spec?.parallelism ?? 1;
    if (role === 'scheduler') {
      if (completions !== 1 || parallelism !== 1) errs.push(`${label}: the scheduler Job must have completions 1 and parallelism 1`);
    } else {
      if (job.spec?.completionMode !== 'Indexed')
        errs.push(`${label}: ${role}s must be an Indexed Job (completionMode: Indexed), so each pod's rank is its completion index`);
      const name = role === 'worker' ? 'DMLC_NUM_WORKER' : 'DMLC_NUM_SERVER';
      const n = staticValue(env, name);
      if (n === undefined) errs.push(`${label}: ${name} is not set (or not a static value)`);
      else {
        if (String(completions) !== n) errs.push(`${label}: ${name}=${n} but the ${role} Job has completions ${completions}`);
        if (String(parallelism) !== n) errs.push(`${label}: ${name}=${n} but the ${role} Job has parallelism ${parallelism} (all ${role}s must run at once)`);
      }
      if (role === 'worker') {
        const id = env.get('DMLC_WORKER_ID');
        if (id && !(typeof id === 'object' && /job-completion-index/.test(id.dynamic ?? '')))
          errs.push(`${label}: DMLC_WORKER_ID must come from the completion index (fieldRef metadata.annotations['batch.kubernetes.io/job-completion-index']) or be unset`);
      }
    }
    const sub = tpl.spec?.subdomain;
    if (sub) {
      const svc = services.find((s) => s.metadata.name === sub);
      if (!svc || !isHeadless(svc)) errs.push(`${label}: subdomain ${sub} names no headless Service`);
      else if (!matches(svc.spec.selector, tpl.metadata?.labels)) errs.push(`${label}: subdomain Service ${sub} does not select this Job's pods`);
    }
  }
  for (const role of ROLES) {
    if (!roles[role]) errs.push(`no Job runs DMLC_ROLE=${role}`);
  }
  if (roles.scheduler?.length > 1) errs.push(`${roles.scheduler.length} scheduler Jobs; there must be one`);
  // Every role must agree on the shared values, and on the Secrets they take (authentication).
  const all = ROLES.flatMap((r) => roles[r] ?? []);
  checkSameSecrets(all.map((x) => ({ label: ref(x.job), container: x.container })), errs);
  for (const name of ['DMLC_PS_ROOT_URI', 'DMLC_PS_ROOT_PORT', 'DMLC_NUM_SERVER', 'DMLC_NUM_WORKER']) {
    const values = new Set(all.map((x) => staticValue(x.env, name)).filter((v) => v !== undefined));
    if (values.size > 1) errs.push(`${name} differs between roles: ${[...values].join(', ')}`);
    for (const x of all)
      if (staticValue(x.env, name) === undefined && !(name === 'DMLC_PS_ROOT_URI' && x === roles.scheduler?.[0]))
        errs.push(`${ref(x.job)}: ${name} is not set (or not a static value)`);
  }
  // Services select pods; the root URI is the scheduler's headless Service, its port the scheduler's port.
  for (const svc of services) {
    if (!templates.some((t) => matches(svc.spec?.selector, t.tpl.metadata?.labels)))
      errs.push(`${ref(svc)}: its selector ${JSON.stringify(svc.spec?.selector ?? {})} selects no pod template`);
  }
  const sched = roles.scheduler?.[0];
  const worker = (roles.worker ?? [])[0] ?? (roles.server ?? [])[0];
  if (sched && worker) {
    const uri = staticValue(worker.env, 'DMLC_PS_ROOT_URI');
    const port = staticValue(worker.env, 'DMLC_PS_ROOT_PORT');
    if (uri !== undefined) {
      const first = uri.split('.')[0];
      const svc = services.find((s) => s.metadata.name === first);
      if (!svc || !isHeadless(svc)) {
        errs.push(`DMLC_PS_ROOT_URI '${uri}' names no headless Service (Services: ${services.map((s) => s.metadata.name).join(', ') || 'none'})`);
      } else {
        if (!matches(svc.spec?.selector, sched.tpl.metadata?.labels))
          errs.push(`${ref(svc)}: DMLC_PS_ROOT_URI names it, but its selector does not select the scheduler's pods`);
        for (const other of [...(roles.server ?? []), ...(roles.worker ?? [])])
          if (matches(svc.spec?.selector, other.tpl.metadata?.labels))
            errs.push(`${ref(svc)}: DMLC_PS_ROOT_URI names it, but it also selects ${ref(other.job)}'s pods`);
        if (svc.spec?.publishNotReadyAddresses !== true)
          errs.push(`${ref(svc)}: the scheduler's Service needs publishNotReadyAddresses: true (its DNS record must exist before the pod is ready)`);
        const cports = sched.container.ports ?? [];
        const sp = (svc.spec?.ports ?? []).find((p) => String(p.port) === port);
        if (!sp) errs.push(`DMLC_PS_ROOT_PORT=${port} is not a port of ${ref(svc)} (${(svc.spec?.ports ?? []).map((p) => p.port).join(', ') || 'none'})`);
        else {
          const target = sp.targetPort ?? sp.port;
          const cp = cports.find((p) => p.name === target || p.containerPort === target);
          if (!cp || String(cp.containerPort) !== port)
            errs.push(`${ref(svc)}: port ${port} targets ${target}, which is not the scheduler's containerPort ${port}`);
        }
        if (!cports.some((p) => String(p.containerPort) === port))
          errs.push(`DMLC_PS_ROOT_PORT=${port} but the scheduler's containerPort is ${cports.map((p) => p.containerPort).join(', ') || 'not declared'}`);
      }
    }
    const sport = staticValue(sched.env, 'DMLC_PS_ROOT_PORT');
    if (sport !== undefined && port !== undefined && sport !== port) errs.push(`the scheduler listens on ${sport} but the others connect to ${port}`);
  }
}

// ZPS_AUTH_TOKEN must be the same on every node: every role takes the same Secrets.
function secretNames(container) {
  return [...(container.envFrom ?? []).filter((f) => f.secretRef).map((f) => f.secretRef.name),
    ...(container.env ?? []).filter((e) => e.valueFrom?.secretKeyRef).map((e) => `${e.valueFrom.secretKeyRef.name}/${e.valueFrom.secretKeyRef.key}`),
    ...(container.env ?? []).filter((e) => /^ZPS_AUTH_TOKEN|^ZPS_CURVE$/.test(e.name) && 'value' in e).map((e) => `literal ${e.name}`)].sort().join(', ');
}

function checkSameSecrets(items, errs) {
  const first = items[0];
  if (!first) return;
  for (const it of items.slice(1)) {
    const a = secretNames(first.container), b = secretNames(it.container);
    if (a !== b) errs.push(`${it.label} takes secrets [${b}] but ${first.label} takes [${a}]; every role needs the same ZPS_AUTH_TOKEN`);
  }
}

function checkMXJob(job, objs, errs) {
  const label = ref(job);
  const configMaps = new Map(objs.filter((o) => o.kind === 'ConfigMap').map((o) => [o.metadata.name, o]));
  const specs = job.spec?.mxReplicaSpecs ?? {};
  if (job.spec?.jobMode !== undefined && job.spec.jobMode !== 'MXTrain') errs.push(`${label}: jobMode must be MXTrain`);
  for (const type of ['Scheduler', 'Server', 'Worker']) if (!specs[type]) errs.push(`${label}: mxReplicaSpecs has no ${type}`);
  if (specs.Scheduler && specs.Scheduler.replicas !== 1) errs.push(`${label}: Scheduler replicas must be 1`);
  const mxContainers = [];
  for (const [type, rs] of Object.entries(specs)) {
    const l = `${label} ${type}`;
    const role = type.toLowerCase();
    const tpl = rs.template ?? {};
    const mx = (tpl.spec?.containers ?? []).find((c) => c.name === 'mxnet');
    if (!mx) {
      errs.push(`${l}: no container named mxnet (the operator injects the DMLC environment only into it and looks up its port)`);
      continue;
    }
    if (!(mx.ports ?? []).some((p) => p.name === 'mxjob-port')) errs.push(`${l}: container mxnet declares no port named mxjob-port`);
    const restart = rs.restartPolicy ?? 'Never';
    if (!['Never', 'OnFailure', 'ExitCode'].includes(restart)) errs.push(`${l}: restartPolicy ${restart}; use Never, OnFailure or ExitCode`);
    const tplWithRestart = { ...tpl, spec: { ...(tpl.spec ?? {}), restartPolicy: restart === 'ExitCode' ? 'Never' : restart } };
    const { env, problems } = containerEnv(mx, configMaps);
    problems.forEach((p) => errs.push(`${l}: ${p}`));
    for (const name of ['DMLC_ROLE', 'DMLC_PS_ROOT_URI', 'DMLC_PS_ROOT_PORT', 'DMLC_NUM_SERVER', 'DMLC_NUM_WORKER', 'DMLC_WORKER_ID'])
      if (env.has(name)) errs.push(`${l}: sets ${name}, which the operator injects (its value would win)`);
    checkPodTemplate(l, role, tplWithRestart, mx, env, errs, { allowedRestart: ['Never', 'OnFailure'] });
    mxContainers.push({ label: l, container: mx });
  }
  checkSameSecrets(mxContainers, errs);
}

function checkVolcano(job, objs, errs) {
  const label = ref(job);
  const configMaps = new Map(objs.filter((o) => o.kind === 'ConfigMap').map((o) => [o.metadata.name, o]));
  const tasks = job.spec?.tasks ?? [];
  const total = tasks.reduce((n, t) => n + (t.replicas ?? 0), 0);
  if (job.spec?.minAvailable !== total)
    errs.push(`${label}: minAvailable ${job.spec?.minAvailable} but the tasks have ${total} pods; a PS job needs all of them at once`);
  const plugins = job.spec?.plugins ?? {};
  for (const p of ['svc', 'env']) if (!(p in plugins)) errs.push(`${label}: plugin ${p} is missing (svc: pod DNS names; env: VC_TASK_INDEX)`);
  const byRole = {};
  for (const t of tasks) {
    const l = `${label} task ${t.name}`;
    const c = roleContainer(t.template, configMaps);
    if (!c) {
      errs.push(`${l}: no containers`);
      continue;
    }
    const { env, problems } = containerEnv(c, configMaps);
    problems.forEach((p) => errs.push(`${l}: ${p}`));
    const role = staticValue(env, 'DMLC_ROLE');
    if (role === undefined) {
      errs.push(`${l}: container ${c.name} sets no DMLC_ROLE`);
      continue;
    }
    checkPodTemplate(l, role, t.template, c, env, errs, { allowedRestart: ['Never', 'OnFailure'] });
    byRole[role] = { task: t, container: c, env };
  }
  for (const role of ROLES) if (!byRole[role]) errs.push(`${label}: no task runs DMLC_ROLE=${role}`);
  checkSameSecrets(Object.values(byRole).map((x) => ({ label: `${label} task ${x.task.name}`, container: x.container })), errs);
  if (byRole.scheduler && byRole.scheduler.task.replicas !== 1) errs.push(`${label}: the scheduler task must have 1 replica`);
  for (const [role, name] of [['server', 'DMLC_NUM_SERVER'], ['worker', 'DMLC_NUM_WORKER']]) {
    for (const x of Object.values(byRole)) {
      const n = staticValue(x.env, name);
      if (byRole[role] && n !== String(byRole[role].task.replicas))
        errs.push(`${label} task ${x.task.name}: ${name}=${n} but task ${role} has ${byRole[role].task.replicas} replicas`);
    }
  }
  if (byRole.scheduler) {
    const expect = `${job.metadata.name}-${byRole.scheduler.task.name}-0.${job.metadata.name}`;
    const cport = (byRole.scheduler.container.ports ?? []).map((p) => String(p.containerPort));
    for (const x of Object.values(byRole)) {
      const uri = staticValue(x.env, 'DMLC_PS_ROOT_URI');
      if (x !== byRole.scheduler && uri !== expect && !(uri ?? '').startsWith(expect + '.'))
        errs.push(`${label} task ${x.task.name}: DMLC_PS_ROOT_URI=${uri}; Volcano's svc plugin names the scheduler ${expect}`);
      const port = staticValue(x.env, 'DMLC_PS_ROOT_PORT');
      if (!cport.includes(port)) errs.push(`${label} task ${x.task.name}: DMLC_PS_ROOT_PORT=${port} but the scheduler's containerPort is ${cport.join(', ') || 'not declared'}`);
    }
  }
}

// All the invariants of one rendered job (native Jobs, an MXJob or a Volcano Job).
export function invariantErrors(objs) {
  const errs = [];
  const mx = objs.filter((o) => o.apiVersion === 'kubeflow.org/v1' && o.kind === 'MXJob');
  const vc = objs.filter((o) => o.apiVersion === 'batch.volcano.sh/v1alpha1' && o.kind === 'Job');
  mx.forEach((j) => checkMXJob(j, objs, errs));
  vc.forEach((j) => checkVolcano(j, objs, errs));
  if (objs.some((o) => o.apiVersion === 'batch/v1' && o.kind === 'Job') || (mx.length === 0 && vc.length === 0)) checkNative(objs, errs);
  return errs;
}

// Everything: render, parse, schema-validate, invariants. Returns {objects, errors}.
export function validateDir(dir) {
  let text;
  try {
    text = renderDir(dir);
  } catch (e) {
    return { objects: [], errors: [e.message] };
  }
  const { objects, errors } = parseDocs(text, path.relative(repoRoot, dir) || dir);
  if (errors.length) return { objects, errors };
  for (const o of objects) errors.push(...schemaCheck(o));
  errors.push(...invariantErrors(objects));
  return { objects, errors };
}
