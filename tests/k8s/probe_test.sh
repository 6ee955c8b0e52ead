#!/usr/bin/env bash
# `zps probe` exit codes and messages, against a real scheduler on 127.0.0.1 (ctest k8s/probe).
# 0: the scheduler's port accepts connections; 1: it does not (one line says why); 2: bad flags or env.
set -uo pipefail
Z=${ZPS_BIN:?set ZPS_BIN to the zps binary}
failures=0; passed=0
check() {  # want_rc, want_regex, command...
  local want=$1 re=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" = "$want" ] && grep -Eq -- "$re" <<<"$out"; then
    passed=$((passed + 1)); echo "ok   exit $rc: $(head -n 1 <<<"$out")"
  else
    failures=$((failures + 1)); echo "FAIL wanted exit $want and /$re/, got exit $rc: $out   (command: $*)"
  fi
}
unset DMLC_PS_ROOT_URI DMLC_PS_ROOT_PORT DMLC_ROLE
# A free port: one the probe itself finds closed.
for _ in $(seq 20); do
  PORT=$((20000 + RANDOM % 30000))
  "$Z" probe --host 127.0.0.1 --port "$PORT" >/dev/null 2>&1 || break
done

check 2 'set DMLC_PS_ROOT_URI or pass --host' "$Z" probe
check 2 'set DMLC_PS_ROOT_PORT or pass --port' env DMLC_PS_ROOT_URI=127.0.0.1 "$Z" probe
check 2 "DMLC_PS_ROOT_PORT='nine' is not a TCP port" env DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=nine "$Z" probe
check 2 '--port=70000 is not a TCP port' "$Z" probe --host 127.0.0.1 --port 70000
check 2 '--probe_timeout=0 is out of range' "$Z" probe --host 127.0.0.1 --port "$PORT" --probe_timeout 0
check 2 "unexpected argument 'extra'" "$Z" probe --host 127.0.0.1 --port "$PORT" extra
check 1 "127.0.0.1:$PORT not reachable \(127.0.0.1: Connection refused\)" "$Z" probe --host 127.0.0.1 --port "$PORT"

# A scheduler that listens is ready; the probe reads the same DMLC environment as every role.
export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$PORT DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1
DMLC_ROLE=scheduler ZPS_RENDEZVOUS_TIMEOUT=20 timeout 30 "$Z" >/tmp/zps-probe-test-$$.log 2>&1 &
SCHED=$!
for _ in $(seq 50); do "$Z" probe >/dev/null 2>&1 && break; sleep 0.1; done
check 0 "127.0.0.1:$PORT \(127.0.0.1\) accepts connections" "$Z" probe
check 0 "localhost:$PORT \(127.0.0.1\) accepts connections" "$Z" probe --host localhost --probe_timeout 1.5
check 0 'accepts connections' env DMLC_ROLE=worker "$Z" probe
kill "$SCHED" 2>/dev/null; wait "$SCHED" 2>/dev/null
if grep -Eiq 'error|malformed|bad frame' /tmp/zps-probe-test-$$.log; then
  failures=$((failures + 1)); echo "FAIL the scheduler logged an error for the probes' bare connections:"; cat /tmp/zps-probe-test-$$.log
else
  passed=$((passed + 1)); echo "ok   the scheduler logged nothing about the probes' connections"
fi
rm -f /tmp/zps-probe-test-$$.log
check 1 'not reachable' "$Z" probe
echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
