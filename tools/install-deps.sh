#!/usr/bin/env bash
# Installs the Debian packages zps builds and tests with. Does nothing when they are all present,
# so run.sh, test.sh, CI and the Dockerfile can call it unconditionally.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config
  libzmq3-dev cppzmq-dev
  libprotobuf-dev protobuf-compiler
  libgflags-dev libgoogle-glog-dev
  catch2 libopenblas-dev libsodium-dev
  libcpp-httplib-dev
)

# What the deployment and dashboard tests run: node and npm (manifest validation, Dockerfile lint), ip and
# unshare (pod simulation). Added only when the command is missing, so a node from elsewhere is kept.
# ZPS_DEPS_BUILD_ONLY=1 (the Dockerfile's build stage) skips them. kubectl is not here: Debian 12's
# kubernetes-client is 1.20, whose kustomize is too old; the tests that need kubectl say SKIPPED without it.
if [ "${ZPS_DEPS_BUILD_ONLY:-0}" != 1 ]; then
  command -v node >/dev/null || PKGS+=(nodejs)
  command -v npm >/dev/null || PKGS+=(npm)
  command -v ip >/dev/null || PKGS+=(iproute2)
  command -v unshare >/dev/null || PKGS+=(util-linux)
  # The dashboard's browser test (tests/dashboard) drives Debian's headless Chromium.
  command -v chromium >/dev/null || PKGS+=(chromium)
  # tools/gpu-kit.sh (and its test) rewrites the programs' loader and RPATH and reads ctest's JSON.
  command -v patchelf >/dev/null || PKGS+=(patchelf)
  command -v jq >/dev/null || PKGS+=(jq)
  # tools/bench/cluster.sh: tc (iproute2) limits each emulated host's link; Open MPI is its all-reduce reference.
  command -v tc >/dev/null || PKGS+=(iproute2)
  command -v mpicc >/dev/null || PKGS+=(openmpi-bin libopenmpi-dev)
  # zps.torch's tests (tests/python, tests/torch) and tools/bench/torch-compare.sh: Debian's PyTorch, for
  # Debian's own interpreter (a python3 earlier on PATH may not see it).
  /usr/bin/python3 -c "import torch" >/dev/null 2>&1 || PKGS+=(python3-torch)
  # zps.torch's tests of real models (torchvision) and its run of Horovod's PyTorch suite (pytest and
  # the helpers that suite imports).
  /usr/bin/python3 -c "import torchvision" >/dev/null 2>&1 || PKGS+=(python3-torchvision)
  /usr/bin/python3 -c "import pytest, cloudpickle, mock" >/dev/null 2>&1 || PKGS+=(python3-pytest python3-cloudpickle python3-mock)
  # tools/format.sh and the format/check test.
  command -v clang-format >/dev/null || PKGS+=(clang-format)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
