#!/usr/bin/env bash
# Installs what is missing, builds, fetches the datasets, and runs the main job: a local cluster
# (1 scheduler, 2 servers, 2 workers) that trains an MLP on the digits dataset and prints each epoch
# and the final test accuracy. Extra arguments go to `zps train` (e.g. --epochs 20).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
"$ROOT/tools/install-deps.sh"
"$ROOT/tools/build.sh"
"$ROOT/tools/fetch-datasets.sh" "$ROOT/data"
exec "${BUILD_DIR:-$ROOT/build}/bin/zps" launch --servers 2 --workers 2 --timeout 600 -- \
  train --model mlp --data digits --data_dir "$ROOT/data" --epochs 10 "$@"
