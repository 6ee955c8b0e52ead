#!/usr/bin/env bash
# Driver for the deployment tests (tests/k8s/CMakeLists.txt registers each as k8s/<name>).
#   run.sh npm-ci | kustomize | manifests | dockerfile | probe | podsim [podsim args] | image
# Environment: ZPS_BIN (the zps binary), ZPS_K8S_NODE_MODULES (where npm ci installs: a folder in the
# build tree; default tests/k8s). Exit 77 = skipped, with the reason printed first.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export ZPS_K8S_NODE_MODULES=${ZPS_K8S_NODE_MODULES:-$HERE}
NM=$ZPS_K8S_NODE_MODULES
SKIP=77

skip() { echo "SKIPPED: $*"; exit $SKIP; }
need_node() {
  command -v node >/dev/null || skip "node is not installed (tools/install-deps.sh installs nodejs)"
}
need_modules() {
  need_node
  [ -d "$NM/node_modules/kubernetes-models" ] && [ -d "$NM/node_modules/yaml" ] ||
    { echo "npm packages missing in $NM/node_modules: run the k8s/npm_ci test first (ctest -R k8s/)"; exit 1; }
}
# kubectl renders the kustomizations. Debian 12's own kubectl (kubernetes-client 1.20) embeds kustomize
# v2, which cannot read them; kubectl 1.24+ prints "Kustomize Version: v4/v5".
need_kubectl() {
  command -v kubectl >/dev/null || skip "kubectl is not installed; it renders the kustomizations (kubectl 1.24 or later; Debian 12 has only 1.20)"
  local v
  v=$(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p')
  [ -n "$v" ] && [ "$v" -ge 4 ] || skip "kubectl $(kubectl version --client 2>/dev/null | head -1) embeds no kustomize v4 or later; need kubectl 1.24 or later"
}

case "${1:-}" in
  npm-ci)
    need_node
    command -v npm >/dev/null || skip "npm is not installed (tools/install-deps.sh installs it)"
    mkdir -p "$NM"
    if [ "$NM" != "$HERE" ]; then
      cp "$HERE/package.json" "$HERE/package-lock.json" "$NM/"
    fi
    stamp=$(sha256sum "$HERE/package-lock.json" | cut -d' ' -f1)
    if [ -f "$NM/node_modules/.zps-lock-sha256" ] && [ "$(cat "$NM/node_modules/.zps-lock-sha256")" = "$stamp" ]; then
      echo "npm ci: $NM/node_modules matches package-lock.json (sha256 ${stamp:0:12}); nothing to do"
      exit 0
    fi
    cd "$NM" && timeout 600 npm ci --prefer-offline --no-audit --no-fund --loglevel=error || exit 1
    echo "$stamp" >"$NM/node_modules/.zps-lock-sha256"
    echo "npm ci: installed $(ls "$NM/node_modules" | wc -l) packages into $NM/node_modules"
    ;;
  kustomize)
    need_kubectl
    echo "$(kubectl version --client 2>/dev/null | tr '\n' ' ')"
    pass=0; failed=0
    for d in "$ROOT"/k8s/base "$ROOT"/k8s/overlays/* "$ROOT"/k8s/variants/*; do
      if out=$(kubectl kustomize "$d" 2>&1); then
        echo "ok   ${d#"$ROOT"/}: $(grep -c '^kind:' <<<"$out") objects"; pass=$((pass + 1))
      else
        echo "FAIL ${d#"$ROOT"/}: $out"; failed=$((failed + 1))
      fi
    done
    echo "$pass passed, $failed failed"
    [ $failed = 0 ]
    ;;
  manifests)
    need_modules
    need_kubectl
    exec node --test "$HERE/manifests.test.mjs"
    ;;
  dockerfile)
    need_modules
    exec node --test "$HERE/dockerfile.test.mjs"
    ;;
  probe)
    exec "$HERE/probe_test.sh"
    ;;
  podsim)
    shift
    need_modules
    exec node "$HERE/podsim.mjs" "$@"
    ;;
  image)
    exec "$HERE/image_test.sh"
    ;;
  *)
    echo "usage: $0 npm-ci|kustomize|manifests|dockerfile|probe|podsim [args]|image"
    exit 2
    ;;
esac
