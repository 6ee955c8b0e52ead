#!/usr/bin/env bash
# Opt-in image test (ZPS_IMAGE_TEST=1; ctest k8s/image_build). Builds the image from the repository's
# Dockerfile without a registry or a Docker engine: Debian's buildah on a Debian 12 base made by
# mmdebstrap, passed as --build-arg BASE. Then it runs the image's entrypoint once per role with
# `buildah run`, on loopback: a scheduler, a server and a worker (zps check) that must all exit 0 with
# their messages, `zps probe` against the running scheduler, and a scheduler with a variable missing,
# which must exit 2 and say which. Needs root, about 5 minutes and 3 GB under $ZPS_IMAGE_WORKDIR
# (default /var/tmp/zps-image-test; the base rootfs is kept there as a cache, the rest is removed unless
# ZPS_IMAGE_KEEP=1). Installs buildah and mmdebstrap from Debian when missing.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${ZPS_IMAGE_WORKDIR:-/var/tmp/zps-image-test}
IMAGE=localhost/zps:test
BASE_IMAGE=localhost/zps-debian-base:bookworm

if [ "${ZPS_IMAGE_TEST:-0}" != 1 ]; then
  echo "SKIPPED: image build: opt-in; run with ZPS_IMAGE_TEST=1 (builds the image with buildah on an mmdebstrap base: root, ~5 min, ~3 GB in $WORK)"
  exit 77
fi
if [ "$(id -u)" != 0 ]; then
  echo "SKIPPED: image build: needs root (buildah --isolation chroot, mmdebstrap --mode=root); running as uid $(id -u)"
  exit 77
fi

fail() { echo "image test: FAIL: $*"; exit 1; }
step() { echo "image test: $(date +%T) $*"; }
T0=$(date +%s)

missing=()
for p in buildah mmdebstrap; do command -v "$p" >/dev/null || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  step "installing ${missing[*]} (Debian)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends buildah mmdebstrap crun fuse-overlayfs >/dev/null \
    || fail "apt-get install ${missing[*]} failed"
fi
echo "image test: $(buildah --version), mmdebstrap $(mmdebstrap --version 2>/dev/null | awk '{print $2}')"

mkdir -p "$WORK/base"
B=(buildah --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  "${B[@]}" rm --all >/dev/null 2>&1
  if [ "${ZPS_IMAGE_KEEP:-0}" != 1 ]; then
    echo "image test: removing the build storage in $WORK (ZPS_IMAGE_KEEP=1 keeps it)"
    "${B[@]}" rmi --all --force >/dev/null 2>&1
    rm -rf "$WORK/storage" "$WORK/run" "$WORK/zps-image.tar"
  fi
}
trap cleanup EXIT

# 1. The base: Debian 12 minbase from the machine's apt sources, as an image named by --build-arg BASE.
if [ ! -s "$WORK/base/rootfs-slim.tar" ]; then
  step "mmdebstrap --variant=minbase bookworm"
  # Like debian:bookworm-slim: no man pages, docs or locales.
  timeout 600 mmdebstrap --variant=minbase --mode=root --format=tar \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    bookworm "$WORK/base/rootfs-slim.tar.part" \
    >"$WORK/mmdebstrap.log" 2>&1 || { tail -20 "$WORK/mmdebstrap.log"; fail "mmdebstrap failed"; }
  mv "$WORK/base/rootfs-slim.tar.part" "$WORK/base/rootfs-slim.tar"
fi
printf 'FROM scratch\nADD rootfs-slim.tar /\nCMD ["bash"]\n' >"$WORK/base/Dockerfile"
step "base image $BASE_IMAGE from rootfs-slim.tar ($(du -h "$WORK/base/rootfs-slim.tar" | cut -f1))"
timeout 600 "${B[@]}" bud --isolation chroot -q -t "$BASE_IMAGE" "$WORK/base" >"$WORK/base-build.log" 2>&1 \
  || { tail -20 "$WORK/base-build.log"; fail "building the base image failed"; }

# 2. The zps image, exactly as a user builds it, with the base chosen by build argument.
step "buildah bud --build-arg BASE=$BASE_IMAGE -t $IMAGE $ROOT"
timeout 1500 "${B[@]}" bud --isolation chroot --layers --pull=never --build-arg "BASE=$BASE_IMAGE" -t "$IMAGE" \
  -f "$ROOT/Dockerfile" "$ROOT" >"$WORK/build.log" 2>&1
rc=$?
grep -E '^(STEP|COMMIT)|^runtime packages:|^zps [0-9]|install-deps:' "$WORK/build.log" | cut -c1-400
[ $rc = 0 ] || { tail -30 "$WORK/build.log"; fail "buildah bud exited $rc (log: $WORK/build.log)"; }

"${B[@]}" images --format '{{.Name}}:{{.Tag}}  {{.Size}}' | grep -v '^<none>' | sed 's/^/image test: image /'
ENTRYPOINT=$("${B[@]}" inspect --type image --format '{{.OCIv1.Config.Entrypoint}}' "$IMAGE")
USERCFG=$("${B[@]}" inspect --type image --format '{{.OCIv1.Config.User}}' "$IMAGE")
echo "image test: entrypoint $ENTRYPOINT, user $USERCFG"
[ "$ENTRYPOINT" = '[zps]' ] || fail "the entrypoint is $ENTRYPOINT, not [zps]"
rm -f "$WORK/zps-image.tar"
if "${B[@]}" push -q "$IMAGE" "docker-archive:$WORK/zps-image.tar:zps:0.1.0" >"$WORK/push.log" 2>&1; then
  echo "image test: docker-archive for docker load: $(du -h "$WORK/zps-image.tar" | cut -f1)"
else
  echo "image test: (buildah push to a docker-archive failed: $(tail -1 "$WORK/push.log"))"
fi

# 3. Each role once from the image: the entrypoint (zps) plus the role's arguments, as the manifests run it.
PORT=$((20000 + RANDOM % 20000))
ENVS=(--env DMLC_PS_ROOT_URI=127.0.0.1 --env "DMLC_PS_ROOT_PORT=$PORT" --env DMLC_NUM_SERVER=1 --env DMLC_NUM_WORKER=1
      --env ZPS_RENDEZVOUS_TIMEOUT=60 --env ZPS_CONNECT_TIMEOUT=30)
run_role() {  # name, role, args... ; logs to $WORK/<name>.log
  local name=$1 role=$2; shift 2
  local ctr
  ctr=$("${B[@]}" from --pull=never --name "zps-$name" "$IMAGE") || fail "buildah from failed"
  timeout 180 "${B[@]}" run --isolation chroot "${ENVS[@]}" --env "DMLC_ROLE=$role" "$ctr" -- zps "$@" \
    >"$WORK/$name.log" 2>&1
}
uid=$("${B[@]}" run --isolation chroot "$("${B[@]}" from --pull=never --name zps-id "$IMAGE")" -- id -u 2>&1)
echo "image test: processes in the image run as uid $uid"
[ "$uid" = 10001 ] || fail "the image runs as uid $uid, not 10001"

step "running scheduler, server and worker from the image on 127.0.0.1:$PORT"
run_role scheduler scheduler & PIDS+=($!); SPID=$!
# The scheduler's readiness check, from the image, before the others start (the scheduler waits for them).
probe_ctr=$("${B[@]}" from --pull=never --name zps-probe "$IMAGE")
probe_rc=1
for _ in $(seq 60); do
  "${B[@]}" run --isolation chroot "${ENVS[@]}" "$probe_ctr" -- zps probe >"$WORK/probe.log" 2>&1 && { probe_rc=0; break; }
  sleep 0.5
done
run_role server server & PIDS+=($!); VPID=$!
run_role worker worker check --rounds 3 --sizes 4K,1M+3 & PIDS+=($!); WPID=$!
wait "$SPID"; s_rc=$?
wait "$VPID"; v_rc=$?
wait "$WPID"; w_rc=$?
PIDS=()
for r in scheduler server worker; do
  rc_var=${r:0:1}_rc; [ "$r" = server ] && rc_var=v_rc
  echo "image test: [$r] exit ${!rc_var}: $(grep -E 'listening on|ready on|zps check:|job complete' "$WORK/$r.log" | tail -2 | sed -E 's/^[IWE][0-9]+ [0-9:.]+ +[0-9]+ //' | tr '\n' '|')"
done
echo "image test: [probe] exit $probe_rc: $(cat "$WORK/probe.log")"
[ $s_rc = 0 ] && grep -q "scheduler listening on 0.0.0.0:$PORT" "$WORK/scheduler.log" && grep -q "job complete" "$WORK/scheduler.log" \
  || { cat "$WORK/scheduler.log"; fail "scheduler: exit $s_rc"; }
[ $v_rc = 0 ] && grep -q "server 0 ready on" "$WORK/server.log" || { cat "$WORK/server.log"; fail "server: exit $v_rc"; }
[ $w_rc = 0 ] && grep -q " 0 wrong" "$WORK/worker.log" || { cat "$WORK/worker.log"; fail "worker: exit $w_rc"; }
[ $probe_rc = 0 ] || fail "zps probe never reached the scheduler: $(cat "$WORK/probe.log")"

# A user error from the image: exit 2 and the variable named.
ctr=$("${B[@]}" from --pull=never --name zps-bad "$IMAGE")
timeout 60 "${B[@]}" run --isolation chroot --env DMLC_ROLE=scheduler --env DMLC_PS_ROOT_PORT=9000 "$ctr" -- zps >"$WORK/bad.log" 2>&1
bad_rc=$?
echo "image test: [scheduler without DMLC_NUM_SERVER] exit $bad_rc: $(grep -v -e '^subprocess exited' -e '^Error: exit status' "$WORK/bad.log")"
[ $bad_rc = 2 ] && grep -q "DMLC_NUM_SERVER is not set" "$WORK/bad.log" || fail "expected exit 2 naming DMLC_NUM_SERVER"

echo "image test: PASS in $(( $(date +%s) - T0 )) s"
