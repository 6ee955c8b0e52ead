#!/usr/bin/env node
// Pod simulation: runs the Jobs of a rendered overlay as "pods" in network namespaces, as close to a cluster
// as one machine allows, and checks that the job completes with every pod exiting 0.
//
//   ZPS_BIN=build/bin/zps node tests/k8s/podsim.mjs [--overlay k8s/overlays/cpu] [--late-dns 3] [--auth]
//     [--config KEY=VALUE]... [--kill-server INDEX] [--timeout 150]
//
// What it does, all inside `unshare --net --mount` so nothing can leave the machine and everything
// (namespaces, links, mounts) disappears when it exits:
//   - one network namespace per pod, a veth on a bridge, a pod IP (10.77.0.x);
//   - /etc/netns/<pod>/hosts as cluster DNS: each headless Service name -> the IPs of the pods it selects
//     (all of them with publishNotReadyAddresses, else only ready ones), <hostname>.<subdomain> for pods
//     with a subdomain, and the pod's own hostname; resolv.conf with the cluster search path and a
//     nameserver that answers nothing;
//   - each container's command (the image's ENTRYPOINT, read from the Dockerfile, plus args) with exactly
//     the environment the manifest gives it: literal values, ConfigMap values (envFrom, configMapKeyRef),
//     fieldRefs (pod IP, completion index annotation, name...), JOB_COMPLETION_INDEX for Indexed Jobs,
//     HOSTNAME and the image's PATH; as the image's non-root user, with the pod's hostname;
//   - emptyDir volumes: a folder per pod and volume, bind-mounted at the container's mountPath (in the
//     container's own mount namespace; a missing mount point such as /checkpoints is created for the run
//     and removed after it), kept across restarts of the container like the kubelet keeps them;
//   - restartPolicy OnFailure: a container that exits non-zero or on a signal is started again in the
//     same pod (same namespace, IP, hostname and volumes), at once (without the kubelet's back-off), at
//     most backoffLimit times;
//   - the scheduler's readinessProbe, run in its namespace like the kubelet does, until it passes;
//   - --late-dns N: the scheduler's Service name appears in the hosts files only N seconds after the pods
//     start (a slow DNS registration); the others must retry and still complete;
//   - --auth: the Secret the pods take (optional in the manifests) exists, with a random ZPS_AUTH_TOKEN, as a
//     user creates it; the scheduler must say that nodes prove the token.
//   - --config KEY=VALUE: sets KEY in the ConfigMap the pods take (envFrom), as a user's configMapGenerator
//     merge would (e.g. a short ZPS_HEARTBEAT_TIMEOUT, so a lost node is noticed within a short test);
//   - --kill-server INDEX: once worker 0 has finished its first epoch, SIGKILLs the container of server
//     INDEX by PID (its zps process), as an OOM kill would; the pod must restart it (restartPolicy
//     OnFailure), the scheduler must log the loss and the new generation, the restarted server must
//     restore its table shard from its volume, worker 0 must roll back to its checkpoint, and every Job
//     must still complete with exit 0 (the recovery overlay, ZPS_RECOVERY=1).
// Without root it prints SKIPPED and exits 77. Every process is stopped by PID, under a deadline.
import { spawn, execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SKIP = 77;
const here = path.dirname(fileURLToPath(import.meta.url));
const selfPath = fileURLToPath(import.meta.url);

function parseArgs(argv) {
  const a = { overlay: null, lateDns: 0, timeout: 150, inner: null, auth: false, config: [], killServer: null };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) fail(`${k} needs a value`, 2);
      return argv[++i];
    };
    if (k === '--overlay') a.overlay = v();
    else if (k === '--late-dns') a.lateDns = Number(v());
    else if (k === '--timeout') a.timeout = Number(v());
    else if (k === '--inner') a.inner = v();
    else if (k === '--auth') a.auth = true;
    else if (k === '--config') {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(v());
      if (!m) fail(`--config needs KEY=VALUE, got '${argv[i]}'`, 2);
      a.config.push([m[1], m[2]]);
    } else if (k === '--kill-server') a.killServer = Number(v());
    else fail(`unknown argument ${k}`, 2);
  }
  if (!(a.lateDns >= 0) || !(a.timeout > 0)) fail('--late-dns and --timeout must be numbers', 2);
  if (a.killServer !== null && !(Number.isInteger(a.killServer) && a.killServer >= 0)) fail('--kill-server needs a server index', 2);
  return a;
}

function fail(msg, code = 1) {
  console.log(`podsim: ${msg}`);
  process.exit(code);
}

function skip(reason) {
  console.log(`SKIPPED: pod simulation: ${reason}`);
  process.exit(SKIP);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const have = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

// ---------------------------------------------------------------------------------------------------
// Outer: checks, plan, then re-run itself inside `unshare --net --mount`.

async function outer(args) {
  if (process.getuid() !== 0)
    skip(`needs root for network namespaces, veth pairs and a bridge (running as uid ${process.getuid()}); CI runs as root`);
  for (const cmd of ['ip', 'unshare', 'setpriv', 'kubectl'])
    if (!have(cmd)) skip(`${cmd} is not installed (${cmd === 'kubectl' ? 'kubectl renders the overlay; Debian 12 has none recent enough' : 'tools/install-deps.sh installs it'})`);
  const probe = spawnSync('unshare', ['--net', '--mount', '--propagation', 'private', 'true'], { encoding: 'utf8' });
  if (probe.status !== 0) skip(`unshare --net --mount does not work here: ${(probe.stderr || '').trim()}`);

  const zps = process.env.ZPS_BIN;
  if (!zps || !fs.existsSync(zps)) fail(`set ZPS_BIN to the zps binary to run (got '${zps ?? ''}')`, 2);

  const { repoRoot, renderDir, parseDocs, schemaCheck } = await import('./lib/manifests.mjs');
  const overlay = path.resolve(args.overlay ?? path.join(repoRoot, 'k8s', 'overlays', 'cpu'));
  const image = imageConfig(path.join(repoRoot, 'Dockerfile'));
  let text;
  try {
    text = renderDir(overlay);
  } catch (e) {
    fail(e.message);
  }
  const { objects, errors } = parseDocs(text, overlay);
  if (args.auth) {
    // What a user does before applying: kubectl create secret generic zps-auth --from-literal=ZPS_AUTH_TOKEN=...
    const job = objects.find((o) => o.kind === 'Job');
    const ref = job?.spec.template.spec.containers[0].envFrom?.find((f) => f.secretRef)?.secretRef.name;
    if (!ref) fail('--auth: the pods take no Secret (envFrom secretRef)');
    const token = Buffer.from(Array.from({ length: 24 }, () => Math.floor(Math.random() * 256))).toString('hex');
    objects.push({ apiVersion: 'v1', kind: 'Secret', metadata: { name: ref }, type: 'Opaque', data: { ZPS_AUTH_TOKEN: Buffer.from(token).toString('base64') } });
  }
  if (args.config.length) {
    // What a user's configMapGenerator merge does: the keys land in the ConfigMap the pods take.
    const names = new Set(objects.filter((o) => o.kind === 'Job')
      .flatMap((j) => j.spec.template.spec.containers.flatMap((c) => c.envFrom ?? []))
      .filter((f) => f.configMapRef).map((f) => f.configMapRef.name));
    const maps = objects.filter((o) => o.kind === 'ConfigMap' && names.has(o.metadata.name));
    if (maps.length === 0) fail('--config: the pods take no ConfigMap (envFrom configMapRef)');
    for (const m of maps) for (const [k, v] of args.config) (m.data ??= {})[k] = v;
  }
  for (const o of objects) errors.push(...schemaCheck(o));
  if (errors.length) fail(`the overlay does not validate:\n  ${errors.join('\n  ')}`);

  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'zps-podsim-'));
  fs.chmodSync(work, 0o755);
  fs.mkdirSync(path.join(work, 'bin'));
  fs.copyFileSync(zps, path.join(work, 'bin', 'zps'));  // readable by the image's non-root user
  fs.chmodSync(path.join(work, 'bin', 'zps'), 0o755);
  const plan = await makePlan(objects, image, work, args);
  fs.writeFileSync(path.join(work, 'plan.json'), JSON.stringify(plan, null, 2));
  console.log(`podsim: ${path.relative(process.cwd(), overlay) || overlay}: ${plan.pods.length} pods` +
    (args.lateDns ? `, scheduler DNS name added after ${args.lateDns} s` : '') + (args.auth ? ', with the auth Secret' : '') +
    args.config.map(([k, v]) => `, ${k}=${v}`).join('') +
    (args.killServer !== null ? `, server ${args.killServer} SIGKILLed after worker 0's first epoch` : '') + `; work dir ${work}`);

  // Mount points for the inner run's private tmpfs mounts and the pods' volumes, removed again if we
  // created them.
  const created = ['/etc/netns', ...new Set(plan.pods.flatMap((p) => p.containers[0].mounts.map((m) => m.dst)))]
    .filter((d) => !fs.existsSync(d));
  for (const d of created) fs.mkdirSync(d, { recursive: true });
  fs.mkdirSync('/run/netns', { recursive: true });
  const child = spawn('unshare', ['--net', '--mount', '--propagation', 'private', '--', process.execPath, selfPath,
    '--inner', path.join(work, 'plan.json'), '--timeout', String(args.timeout), '--late-dns', String(args.lateDns),
    ...(args.killServer !== null ? ['--kill-server', String(args.killServer)] : [])],
  { stdio: 'inherit', env: process.env });
  let timedOut = false;
  const killer = setTimeout(() => {
    timedOut = true;
    console.log(`podsim: the simulation ran past ${args.timeout + 20} s; stopping it (pid ${child.pid})`);
    try { process.kill(child.pid, 'SIGTERM'); } catch {}
    setTimeout(() => { try { process.kill(child.pid, 'SIGKILL'); } catch {} }, 5000).unref();
  }, (args.timeout + 20) * 1000);
  const code = await new Promise((r) => child.on('exit', (c, s) => r(c ?? (s ? 128 : 1))));
  clearTimeout(killer);
  for (const d of created) {
    try { fs.rmdirSync(d); } catch {}
  }
  if (code === 0 && !process.env.ZPS_PODSIM_KEEP) fs.rmSync(work, { recursive: true, force: true });
  else console.log(`podsim: logs kept in ${work}/pods/*/log`);
  process.exit(timedOut ? 1 : code);
}

// The image's ENTRYPOINT, CMD, PATH and USER, from the Dockerfile's last stage.
function imageConfig(dockerfile) {
  const cfg = { entrypoint: ['zps'], cmd: [], path: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', uid: 10001, gid: 10001 };
  if (!fs.existsSync(dockerfile)) return cfg;
  const stages = fs.readFileSync(dockerfile, 'utf8').replace(/\\\n/g, ' ').split(/^FROM\s/m);
  const last = stages[stages.length - 1];
  const ep = /^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(last);
  if (ep) cfg.entrypoint = JSON.parse(ep[1]);
  const cmd = /^CMD\s+(\[.*\])\s*$/m.exec(last);
  if (cmd) cfg.cmd = JSON.parse(cmd[1]);
  const user = /^USER\s+(\d+)(?::(\d+))?\s*$/m.exec(last);
  if (user) {
    cfg.uid = Number(user[1]);
    cfg.gid = Number(user[2] ?? user[1]);
  }
  return cfg;
}

const POD_CHARS = 'bcdfghjklmnpqrstvwxz2456789';
const randSuffix = () => Array.from({ length: 5 }, () => POD_CHARS[Math.floor(Math.random() * POD_CHARS.length)]).join('');

async function makePlan(objects, image, work, args) {
  const { containerEnv, expandRefs, matches } = await import('./lib/manifests.mjs');
  const ns = 'default';
  const configMaps = new Map(objects.filter((o) => o.kind === 'ConfigMap').map((o) => [o.metadata.name, o]));
  const secrets = new Map(objects.filter((o) => o.kind === 'Secret').map((o) => [o.metadata.name, o]));
  const services = objects.filter((o) => o.kind === 'Service' && o.spec?.clusterIP === 'None');
  const jobs = objects.filter((o) => o.apiVersion === 'batch/v1' && o.kind === 'Job');
  if (jobs.length === 0) fail('the overlay has no Jobs to run');
  const pods = [];
  let n = 0;
  for (const job of jobs) {
    const indexed = job.spec.completionMode === 'Indexed';
    const count = job.spec.completions ?? 1;
    if ((job.spec.parallelism ?? 1) < count) fail(`${job.metadata.name}: parallelism < completions; the simulation runs every pod at once`);
    for (let i = 0; i < count; i++) {
      const tpl = job.spec.template;
      const name = indexed ? `${job.metadata.name}-${i}-${randSuffix()}` : `${job.metadata.name}-${randSuffix()}`;
      const hostname = tpl.spec.hostname ?? (indexed ? `${job.metadata.name}-${i}` : name);
      const ip = `10.77.0.${10 + n++}`;
      const labels = { ...(tpl.metadata?.labels ?? {}), 'batch.kubernetes.io/job-name': job.metadata.name, 'job-name': job.metadata.name };
      const annotations = { ...(tpl.metadata?.annotations ?? {}) };
      if (indexed) {
        labels['batch.kubernetes.io/job-completion-index'] = String(i);
        annotations['batch.kubernetes.io/job-completion-index'] = String(i);
      }
      const field = (fp) => {
        const m = /^metadata\.(annotations|labels)\['(.+)'\]$/.exec(fp);
        if (m) return (m[1] === 'labels' ? labels : annotations)[m[2]];
        return {
          'metadata.name': name, 'metadata.namespace': ns, 'metadata.uid': `uid-${name}`,
          'spec.nodeName': 'podsim-node', 'spec.serviceAccountName': 'default',
          'status.podIP': ip, 'status.podIPs': ip, 'status.hostIP': '10.77.0.1', 'status.hostIPs': '10.77.0.1',
        }[fp];
      };
      const dir = path.join(work, 'pods', name);
      fs.mkdirSync(dir, { recursive: true });
      fs.chmodSync(dir, 0o755);
      const volumes = new Map((tpl.spec.volumes ?? []).map((v) => [v.name, v]));
      const containers = tpl.spec.containers.map((c) => {
        // emptyDir volumes: a folder of the pod (world-writable like the kubelet's), bind-mounted in the container.
        const mounts = (c.volumeMounts ?? []).map((vm) => {
          const v = volumes.get(vm.name);
          if (!v?.emptyDir) fail(`${name}/${c.name}: volume '${vm.name}' is not an emptyDir; the simulation mounts only those`);
          if (!path.isAbsolute(vm.mountPath)) fail(`${name}/${c.name}: mountPath '${vm.mountPath}' is not absolute`);
          const src = path.join(dir, 'volumes', vm.name);
          fs.mkdirSync(src, { recursive: true });
          fs.chmodSync(src, 0o777);
          return { src, dst: vm.mountPath };
        });
        // What the container runtime and the Job controller add, then what the manifest gives.
        const env = new Map([['PATH', image.path], ['HOSTNAME', hostname]]);
        if (indexed) env.set('JOB_COMPLETION_INDEX', String(i));
        const r = containerEnv(c, configMaps, { field }, secrets);
        if (r.problems.length) fail(`${name}/${c.name}: ${r.problems.join('; ')}`);
        for (const [k, v] of r.env) env.set(k, expandRefs(v, env));
        const argv = c.command ? [...c.command, ...(c.args ?? [])] : [...image.entrypoint, ...(c.args ?? image.cmd)];
        const probe = c.readinessProbe?.exec?.command;
        return {
          name: c.name,
          mounts,
          env: [...env.entries()],
          argv: argv.map((a) => expandRefs(a, env)),
          readiness: probe ? {
            argv: probe, period: c.readinessProbe.periodSeconds ?? 10, timeout: c.readinessProbe.timeoutSeconds ?? 1,
            initialDelay: c.readinessProbe.initialDelaySeconds ?? 0,
          } : null,
        };
      });
      pods.push({ name, job: job.metadata.name, index: indexed ? i : null, hostname, subdomain: tpl.spec.subdomain ?? null,
        ip, labels, containers, dir, restartPolicy: tpl.spec.restartPolicy ?? 'Always', backoffLimit: job.spec.backoffLimit ?? 6, role: containers.map((c) => new Map(c.env).get('DMLC_ROLE')).find(Boolean) ?? null });
    }
  }
  if (pods.some((p) => p.containers.length !== 1)) fail('the simulation runs one container per pod');
  const svcs = services.map((s) => ({
    name: s.metadata.name, publishNotReady: s.spec.publishNotReadyAddresses === true,
    pods: pods.filter((p) => matches(s.spec.selector, p.labels)).map((p) => p.name),
  }));
  // The Service the workers' DMLC_PS_ROOT_URI names: the one whose record is late with --late-dns.
  const uri = pods.map((p) => new Map(p.containers[0].env).get('DMLC_PS_ROOT_URI')).find(Boolean) ?? '';
  const lateService = args.lateDns ? uri.split('.')[0] : null;
  if (args.lateDns && !svcs.some((s) => s.name === lateService)) fail(`DMLC_PS_ROOT_URI '${uri}' names no headless Service`);
  return { ns, work, uid: image.uid, gid: image.gid, pods, services: svcs, auth: args.auth, jobs: jobs.map((j) => ({ name: j.metadata.name, completions: j.spec.completions ?? 1 })), lateService };
}

// ---------------------------------------------------------------------------------------------------
// Inner: runs inside `unshare --net --mount`. Builds the pod network and runs the pods.

const sh = (cmd, argv) => execFileSync(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });

function setupNetwork(plan) {
  sh('mount', ['-t', 'tmpfs', 'podsim-etc-netns', '/etc/netns']);  // private to this mount namespace
  sh('mount', ['-t', 'tmpfs', 'podsim-run-netns', '/run/netns']);
  sh('ip', ['link', 'set', 'lo', 'up']);
  sh('ip', ['link', 'add', 'br0', 'type', 'bridge']);
  sh('ip', ['addr', 'add', '10.77.0.1/24', 'dev', 'br0']);
  sh('ip', ['link', 'set', 'br0', 'up']);
  plan.pods.forEach((p, i) => {
    sh('ip', ['netns', 'add', p.name]);
    sh('ip', ['link', 'add', `veth${i}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', p.name]);
    sh('ip', ['link', 'set', `veth${i}`, 'master', 'br0', 'up']);
    sh('ip', ['-n', p.name, 'addr', 'add', `${p.ip}/24`, 'dev', 'eth0']);
    sh('ip', ['-n', p.name, 'link', 'set', 'eth0', 'up']);
    sh('ip', ['-n', p.name, 'link', 'set', 'lo', 'up']);
    fs.mkdirSync(`/etc/netns/${p.name}`);
    fs.writeFileSync(`/etc/netns/${p.name}/resolv.conf`,
      `search ${plan.ns}.svc.cluster.local svc.cluster.local cluster.local\nnameserver 127.0.0.1\noptions ndots:5 timeout:1 attempts:1\n`);
  });
}

// Cluster DNS as hosts files. Rewritten in place (same inode: `ip netns exec` bind-mounts the file).
function writeHosts(plan, state) {
  const suffixes = (name) => [name, `${name}.${plan.ns}`, `${name}.${plan.ns}.svc`, `${name}.${plan.ns}.svc.cluster.local`];
  const lines = [];
  for (const s of plan.services) {
    if (s.name === plan.lateService && !state.lateDnsPublished) continue;
    for (const podName of s.pods) {
      const p = plan.pods.find((x) => x.name === podName);
      if (!s.publishNotReady && !state.ready.has(p.name)) continue;
      if (!state.running.has(p.name)) continue;  // a finished pod leaves the endpoints
      lines.push(`${p.ip}\t${suffixes(s.name).join(' ')}`);
      if (p.subdomain === s.name) lines.push(`${p.ip}\t${suffixes(`${p.hostname}.${s.name}`).join(' ')}`);
    }
  }
  for (const p of plan.pods) {
    const own = p.subdomain ? `${p.hostname}.${p.subdomain}.${plan.ns}.svc.cluster.local ${p.hostname}.${p.subdomain} ` : '';
    const text = `127.0.0.1\tlocalhost\n${p.ip}\t${own}${p.hostname}\n${lines.join('\n')}\n`;
    const fd = fs.openSync(`/etc/netns/${p.name}/hosts`, 'w');  // O_TRUNC, same inode
    fs.writeSync(fd, text);
    fs.closeSync(fd);
  }
}

// A command in a pod: its network namespace, its hostname, the image's user, exactly `env`.
function podSpawn(plan, pod, env, argv, out) {
  const envMap = new Map(env);
  let exe = argv[0];
  if (!exe.includes('/')) {
    const dir = (envMap.get('PATH') ?? '').split(':').find((d) => d && fs.existsSync(path.join(dir0(d, plan), exe)));
    if (!dir) throw new Error(`${pod.name}: '${exe}' is not on the container's PATH`);
    exe = path.join(dir0(dir, plan), exe);
  }
  // $0 = hostname, $1/$2 = uid/gid, $3 = number of volumes, then SOURCE MOUNTPATH per volume, then
  // NAME=VALUE pairs and the command for `env -i`. `ip netns exec` gives every command its own mount
  // namespace, so the bind mounts are the container's alone; the processes exec each other, so the
  // returned process's PID ends up the container's command's.
  const wrapper = 'hostname "$0" && u=$1 g=$2 n=$3 && shift 3 && ' +
    'while [ "$n" -gt 0 ]; do mount --bind "$1" "$2" || exit 125; shift 2; n=$((n - 1)); done && ' +
    'exec setpriv --reuid="$u" --regid="$g" --clear-groups -- env -i "$@"';
  const pairs = env.map(([k, v]) => `${k}=${v}`);
  const mounts = pod.containers[0].mounts;
  return spawn('ip', ['netns', 'exec', pod.name, 'unshare', '--uts', '--', '/bin/sh', '-c', wrapper, pod.hostname,
    String(plan.uid), String(plan.gid), String(mounts.length), ...mounts.flatMap((m) => [m.src, m.dst]), ...pairs, exe,
    ...argv.slice(1)].map(String),
  { cwd: pod.dir, stdio: ['ignore', out, out], env: { PATH: process.env.PATH } });
}

// The image's /usr/local/bin holds the zps under test: map it to the work dir's copy.
function dir0(d, plan) {
  return d === '/usr/local/bin' ? path.join(plan.work, 'bin') : d;
}

function stop(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  try { process.kill(proc.pid, 'SIGTERM'); } catch {}
  setTimeout(() => { if (proc.exitCode === null && proc.signalCode === null) try { process.kill(proc.pid, 'SIGKILL'); } catch {} }, 3000).unref();
}

function runToEnd(proc, timeoutMs) {
  return new Promise((resolve) => {
    const t = setTimeout(() => stop(proc), timeoutMs);
    proc.on('exit', (code, signal) => {
      clearTimeout(t);
      resolve({ code, signal });
    });
  });
}

function tail(file, n = 25) {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-n).map((l) => `      ${l}`).join('\n');
  } catch {
    return '      (no log)';
  }
}

async function inner(args) {
  const plan = JSON.parse(fs.readFileSync(args.inner, 'utf8'));
  setupNetwork(plan);
  const state = { ready: new Set(), running: new Set(plan.pods.map((p) => p.name)), lateDnsPublished: !plan.lateService };
  // Pods without a readiness probe are ready once started.
  for (const p of plan.pods) if (!p.containers[0].readiness) state.ready.add(p.name);
  writeHosts(plan, state);

  const failures = [];
  const t0 = Date.now();
  const secs = () => ((Date.now() - t0) / 1000).toFixed(1);
  const deadline = t0 + args.timeout * 1000;

  // With late DNS: before the name exists, zps probe from a worker must say it cannot resolve it.
  if (plan.lateService) {
    const w = plan.pods.find((p) => p.role === 'worker') ?? plan.pods[0];
    const file = path.join(w.dir, 'early-probe.log');
    const out = fs.openSync(file, 'w');
    const r = await runToEnd(podSpawn(plan, w, w.containers[0].env, ['zps', 'probe', '--probe_timeout', '2'], out), 10000);
    fs.closeSync(out);
    const text = fs.readFileSync(file, 'utf8');
    console.log(`podsim: ${secs()} s: zps probe from ${w.hostname} before the name exists: exit ${r.code}: ${text.trim()}`);
    if (r.code !== 1 || !/cannot resolve/.test(text)) failures.push(`zps probe before DNS: expected exit 1 "cannot resolve", got ${r.code}: ${text.trim()}`);
  }

  const t1 = Date.now();
  const results = new Map();
  const procs = [];
  const current = new Map();  // pod name -> its container's running process
  // A pod: its container, started again in place after a failure under restartPolicy OnFailure. The
  // log keeps every run, each restart marked (kubectl logs --previous shows the one before).
  const runPod = async (p) => {
    const log = path.join(p.dir, 'log');
    const c = p.containers[0];
    for (let restarts = 0; ; restarts++) {
      const out = fs.openSync(log, 'a');
      const proc = podSpawn(plan, p, c.env, c.argv, out);
      fs.closeSync(out);
      procs.push(proc);
      current.set(p.name, proc);
      console.log(`podsim: ${secs()} s: ${restarts ? `restarted the container of ${p.name} (restart ${restarts}, pid ${proc.pid})` :
        `started ${p.name} (${p.ip}, hostname ${p.hostname}): ${c.argv.join(' ')}`}`);
      const r = await runToEnd(proc, deadline - Date.now());
      if (r.code !== 0 && p.restartPolicy === 'OnFailure' && restarts < p.backoffLimit && Date.now() < deadline) {
        console.log(`podsim: ${secs()} s: the container of ${p.name} exited ${r.code ?? r.signal}; restartPolicy OnFailure`);
        fs.appendFileSync(log, `--- podsim: the container exited ${r.code ?? r.signal}; restart ${restarts + 1} ---\n`);
        continue;
      }
      results.set(p.name, { ...r, seconds: (Date.now() - t1) / 1000, restarts });
      state.running.delete(p.name);
      writeHosts(plan, state);
      console.log(`podsim: ${secs()} s: ${p.name} exited ${r.code ?? r.signal}`);
      return;
    }
  };
  const waits = plan.pods.map(runPod);
  process.on('SIGTERM', () => {
    procs.forEach(stop);
    setTimeout(() => process.exit(1), 3500);
  });

  // The kubelet's readiness probes, run in each pod's namespace with the container's environment.
  const readyAt = new Map();
  const probes = plan.pods.filter((p) => p.containers[0].readiness).map(async (p) => {
    const r = p.containers[0].readiness;
    await sleep(r.initialDelay * 1000);
    const period = Math.min(r.period, 0.5) * 1000;  // faster than the manifest's period, same probe
    let last = '';
    while (state.running.has(p.name) && Date.now() < deadline) {
      const file = path.join(p.dir, 'probe.log');
      const out = fs.openSync(file, 'w');
      const res = await runToEnd(podSpawn(plan, p, p.containers[0].env, r.argv, out), r.timeout * 1000);
      fs.closeSync(out);
      last = fs.readFileSync(file, 'utf8').trim();
      if (res.code === 0) {
        readyAt.set(p.name, secs());
        state.ready.add(p.name);
        writeHosts(plan, state);
        console.log(`podsim: ${secs()} s: ${p.name} is ready: ${last}`);
        return;
      }
      await sleep(period);
    }
    failures.push(`${p.name}: its readiness probe never passed while it ran (last: ${last || 'no output'})`);
  });

  if (plan.lateService) {
    await sleep(args.lateDns * 1000 - (Date.now() - t1));
    state.lateDnsPublished = true;
    writeHosts(plan, state);
    console.log(`podsim: ${secs()} s: published the DNS name ${plan.lateService}`);
  }
  let victim = null;
  if (args.killServer !== null) {
    victim = plan.pods.find((p) => p.role === 'server' && p.index === args.killServer);
    const watched = plan.pods.find((p) => p.role === 'worker' && p.index === 0);
    if (!victim || !watched) failures.push(`--kill-server ${args.killServer}: the overlay has no such server or no worker 0`);
    else {
      // Mid-training: worker 0 has finished (and, synchronous, checkpointed) its first epoch.
      const log = path.join(watched.dir, 'log');
      while (Date.now() < deadline && state.running.has(watched.name) && !fs.readFileSync(log, 'utf8').includes('Training. Epoch 1,'))
        await sleep(50);
      const proc = current.get(victim.name);
      let comm = '';
      try { comm = fs.readFileSync(`/proc/${proc.pid}/comm`, 'utf8').trim(); } catch {}
      if (!state.running.has(watched.name) || comm !== 'zps') {
        failures.push(`--kill-server: could not kill server ${args.killServer} mid-training (worker 0 ${state.running.has(watched.name) ? 'runs' : 'ended'}, pid ${proc.pid} is '${comm}')`);
      } else {
        process.kill(proc.pid, 'SIGKILL');
        console.log(`podsim: ${secs()} s: worker 0 finished epoch 1: SIGKILLed the container of ${victim.name} (pid ${proc.pid}, ${comm})`);
      }
    }
  }
  await Promise.all(waits);
  await Promise.all(probes);

  // Verdict.
  for (const p of plan.pods) {
    const r = results.get(p.name);
    const log = fs.existsSync(path.join(p.dir, 'log')) ? fs.readFileSync(path.join(p.dir, 'log'), 'utf8') : '';
    if (r.code !== 0) failures.push(`${p.name} (${p.role}) exited ${r.code ?? `on ${r.signal}`}${r.seconds * 1000 >= args.timeout * 1000 - 1000 ? ' (stopped at the deadline)' : ''}`);
    if (p.role === 'worker' || p.role === 'server') {
      const env = new Map(p.containers[0].env);
      const source = p.role === 'worker' ? (env.has('DMLC_WORKER_ID') ? 'DMLC_WORKER_ID' : 'JOB_COMPLETION_INDEX') : 'JOB_COMPLETION_INDEX';
      if (p.index !== null && !log.includes(`rank from ${source} = ${p.index}`))
        failures.push(`${p.name}: its log does not say "rank from ${source} = ${p.index}"`);
      if (!log.includes(`advertising ${p.ip}:`)) failures.push(`${p.name}: its log does not say it advertises its pod IP ${p.ip}`);
    }
    if (p.role === 'worker' && r.code === 0 && /check/.test(p.containers[0].argv.join(' ')) && !/ 0 wrong/.test(log))
      failures.push(`${p.name}: zps check did not report "0 wrong"`);
    if (p.role === 'worker' && r.code === 0 && /train/.test(p.containers[0].argv.join(' ')) && !/Final test /.test(log))
      failures.push(`${p.name}: zps train did not report its final test metric`);
  }
  for (const j of plan.jobs) {
    const ok = plan.pods.filter((p) => p.job === j.name && results.get(p.name)?.code === 0).length;
    console.log(`podsim: Job ${j.name}: ${ok}/${j.completions} succeeded${ok === j.completions ? ' (Complete)' : ' (not complete)'}`);
    if (ok !== j.completions) failures.push(`Job ${j.name} did not complete: ${ok}/${j.completions} pods succeeded`);
  }
  if (plan.auth) {
    const sched = plan.pods.find((p) => p.role === 'scheduler');
    const missing = plan.pods.filter((p) => !new Map(p.containers[0].env).get('ZPS_AUTH_TOKEN'));
    if (missing.length) failures.push(`auth: no ZPS_AUTH_TOKEN in ${missing.map((p) => p.name).join(', ')}`);
    const slog = fs.readFileSync(path.join(sched.dir, 'log'), 'utf8');
    const line = slog.split('\n').find((l) => /nodes must prove ZPS_AUTH_TOKEN/.test(l));
    console.log(`podsim: auth: ${line ? line.replace(/^.*\] /, '') : 'the scheduler did not say it requires ZPS_AUTH_TOKEN'}`);
    if (!line) failures.push('auth: the scheduler did not say "nodes must prove ZPS_AUTH_TOKEN"');
  }
  if (plan.lateService) {
    const logs = plan.pods.filter((p) => p.role !== 'scheduler').map((p) => fs.readFileSync(path.join(p.dir, 'log'), 'utf8'));
    const retried = logs.filter((l) => /cannot resolve scheduler host/.test(l)).length;
    const resolved = logs.filter((l) => /resolved to \S+ after \d+ attempts/.test(l)).length;
    console.log(`podsim: late DNS: ${retried} of ${logs.length} nodes logged failed lookups, ${resolved} resolved after retrying`);
    if (retried === 0 || resolved === 0) failures.push('late DNS: no node logged a failed lookup followed by a successful one');
  }
  if (victim) {
    // The loss and the new generation in the scheduler's log, the shard restored from the pod's volume by
    // the restarted server, and the roll-back in worker 0's.
    const text = (p) => fs.readFileSync(path.join(p.dir, 'log'), 'utf8');
    const sched = plan.pods.find((p) => p.role === 'scheduler');
    const worker0 = plan.pods.find((p) => p.role === 'worker' && p.index === 0);
    const restarted = text(victim).split(/^--- podsim: .*restart 1 ---$/m)[1] ?? '';
    const expect = [
      [sched, text(sched), `lost server ${args.killServer}`],
      [sched, text(sched), 'address book of generation 1 sent'],
      [victim, restarted, 'restored table'],
      [worker0, text(worker0), 'rolling back to the latest checkpoint'],
    ];
    for (const [p, t, what] of expect) {
      const line = t.split('\n').find((l) => l.includes(what));
      console.log(`podsim: recovery: ${p.role}${p.index === null ? '' : ` ${p.index}`}: ${line ? line.replace(/^.*?\] /, '') : `no line with '${what}'`}`);
      if (!line) failures.push(`recovery: ${p.name}'s log${p === victim ? ' after its restart' : ''} has no line with '${what}'`);
    }
    const restarts = results.get(victim.name).restarts;
    if (restarts !== 1) failures.push(`recovery: ${victim.name} was restarted ${restarts} times, expected once`);
    const others = plan.pods.filter((p) => p !== victim && results.get(p.name).restarts > 0);
    if (others.length) failures.push(`recovery: ${others.map((p) => p.name).join(', ')} restarted too`);
  }
  for (const p of plan.pods) {
    const r = results.get(p.name);
    console.log(`  ${p.name.padEnd(28)} ${p.role.padEnd(9)} ${p.ip.padEnd(11)} exit ${String(r.code ?? r.signal).padEnd(3)} ${r.seconds.toFixed(1)} s` +
      (readyAt.has(p.name) ? `, ready at ${readyAt.get(p.name)} s` : '') + (r.restarts ? `, ${r.restarts} restart${r.restarts > 1 ? 's' : ''}` : ''));
  }
  if (failures.length) {
    console.log(`podsim: FAILED:\n  ${failures.join('\n  ')}`);
    for (const p of plan.pods) console.log(`  --- ${p.name} log (last lines):\n${tail(path.join(p.dir, 'log'))}`);
    process.exit(1);
  }
  for (const p of plan.pods.filter((x) => x.role === 'worker')) {
    const line = fs.readFileSync(path.join(p.dir, 'log'), 'utf8').split('\n').find((l) => l.startsWith('zps check:'));
    if (line) console.log(`  ${p.hostname}: ${line}`);
  }
  console.log(`podsim: PASS: every Job completed and all ${plan.pods.length} pods exited 0 in ${((Date.now() - t1) / 1000).toFixed(1)} s`);
  process.exit(0);
}

const args = parseArgs(process.argv.slice(2));
if (args.inner) inner(args).catch((e) => { console.log(`podsim: ${e.stack || e}`); process.exit(1); });
else outer(args).catch((e) => { console.log(`podsim: ${e.stack || e}`); process.exit(1); });
