# Sourced by the benchmarks that run PyTorch scripts (torch-compare.sh, dlrm-compare.sh) once they set
# TOOL (their name), ZPS, BUILD_DIR, PYTHON, OUT_DIR and RESULTS: exits 2 when zps is not built and 77
# when $PYTHON cannot import torch and zps.torch; puts the build's Python package on PYTHONPATH; empties
# $RESULTS; sets failed=0; and defines keep and gloo_pair.
[ -x "$ZPS" ] || { echo "$TOOL: $ZPS not found; build first (tools/build.sh)" >&2; exit 2; }
export PYTHONPATH=$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}
if ! why=$("$PYTHON" -c "import torch, zps.torch" 2>&1); then
  echo "SKIPPED: $PYTHON cannot import torch and zps.torch (python3-torch, a build with the Python package): ${why##*$'\n'}"
  exit 77
fi
mkdir -p "$OUT_DIR"
: >"$RESULTS"
failed=0

# keep NAME FILE [FIELDS]: appends the JSON line a run printed (zps launch prefixes it with
# "[worker 0] ") to $RESULTS, with "round": $round and FIELDS ('"key": value, ...') first; a run that
# printed none fails the benchmark, its output's tail shown.
keep() {
  if ! sed -n 's/^\(\[worker 0\] \)\{0,1\}\({.*}\)$/\2/p' "$2" | grep -q .; then
    echo "$TOOL: $1 printed no result; its output:" >&2
    tail -20 "$2" >&2
    failed=1
    return
  fi
  sed -n 's/^\(\[worker 0\] \)\{0,1\}{\(.*}\)$/{"round": '"$round"', '"${3:+$3, }"'\2/p' "$2" >>"$RESULTS"
}

# gloo_pair OUT COMMAND...: COMMAND as ranks 0 and 1 of torch.distributed over Gloo on loopback (the
# environment torchrun sets), rank R's output in OUT-R.out; returns when both ended.
gloo_pair() {
  local out=$1 port pids=() r
  shift
  port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GLOO_SOCKET_IFNAME=lo "$@" >"$out-$r.out" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
}
