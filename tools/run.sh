#!/usr/bin/env bash
# Installs what is missing, builds, fetches the datasets, and runs the main job: a local cluster
# (1 scheduler, 2 servers, 2 workers) that trains an MLP on the digits dataset and prints each epoch
# and the final test accuracy. Extra arguments go to `zps train` (e.g. --epochs 20).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
"$ROOT/tools/install-deps.sh"
# Only the zps program: the main job needs nothing else (tools/test.sh builds the tests too).
BIN=${BUILD_DIR:-$ROOT/build}/bin/zps
if [ ! -x "$BIN" ]; then
  # Measured for a fresh build folder without ccache: CPU time (user + system), which 2 cores can at
  # best halve.
  echo "run.sh: first build: only the zps program (tools/test.sh builds the tests too): 7.1 CPU-minutes" \
       "without ccache (18.8 for everything), so 4 minutes or more on 2 cores; later runs rebuild only what changed"
fi
start=$SECONDS
BUILD_TARGETS=zps "$ROOT/tools/build.sh"
echo "run.sh: the build took $((SECONDS - start)) s"
"$ROOT/tools/fetch-datasets.sh" "$ROOT/data"
exec "$BIN" launch --servers 2 --workers 2 --timeout 600 -- \
  train --model mlp --data digits --data_dir "$ROOT/data" "$@"
