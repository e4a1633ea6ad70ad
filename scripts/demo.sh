#!/usr/bin/env bash
# MAP's main job on an embedded default (the README's first command): install what it needs,
# build, then start the coordinator `mapd` and two CPU workers on this machine, submit a small
# GPT trained byte-level on this repository's text with a memory budget that forces a
# non-trivial plan (ZeRO sharding instead of plain data parallelism), print the plan, watch the
# loss fall, show where the metrics are, and shut everything down cleanly.
#
# Knobs (environment): MAPD_DEMO_STEPS (default 120), MAPD_DEMO_BUDGET (default 12MiB per rank).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh --target mapctl mapctl-torch mapd mapd-worker mapd-rank
BUILD_DIR="${MAPD_BUILD_DIR:-build}"
MAPCTL="$PWD/$BUILD_DIR/client/mapctl/mapctl"
MAPD="$PWD/$BUILD_DIR/server/mapd"
WORKER="$PWD/$BUILD_DIR/worker/daemon/mapd-worker"
OUT="$PWD/$BUILD_DIR/demo"
STEPS="${MAPD_DEMO_STEPS:-120}"
BUDGET="${MAPD_DEMO_BUDGET:-12MiB}"
MODEL="gpt2:layers=4,hidden=128,heads=4,vocab=256,seq=64,batch=8"

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

rm -rf "$OUT" && mkdir -p "$OUT"
cat README.md docs/*.md > "$OUT/corpus.txt"
# A fresh token only this user can read.
(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$OUT/token")
# The workers' own token: a client's cannot register a worker.
(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$OUT/worker-token")

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# Waits for a line matching $2 in log $1 and prints its match of $3 (a sed -n expression).
wait_for() {
  local log=$1 pattern=$2 extract=$3
  for _ in $(seq 1 600); do
    if grep -q "$pattern" "$log" 2>/dev/null; then sed -n "$extract" "$log" | head -1; return 0; fi
    sleep 0.1
  done
  echo "demo: timed out waiting for '$pattern' in $log:" >&2; cat "$log" >&2; return 1
}

step "Starting the coordinator: mapd (SQLite store, bearer token, checkpoints, /metrics)"
"$MAPD" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --store "$OUT/jobs.db" --token-file "$OUT/token" \
  --worker-token-file "$OUT/worker-token" --checkpoint-dir "$OUT/checkpoints" > "$OUT/mapd.log" 2>&1 &
PIDS+=($!); MAPD_PID=$!
PORT=$(wait_for "$OUT/mapd.log" "serving on port" 's/.*serving on port \([0-9]*\).*/\1/p')
COORD_METRICS=$(wait_for "$OUT/mapd.log" "metrics on" 's/.*metrics on \(http[^ ]*\).*/\1/p')
export MAPD_ADDRESS="127.0.0.1:$PORT" MAPD_TOKEN="$(cat "$OUT/token")"
echo "mapd on $MAPD_ADDRESS (log: $OUT/mapd.log)"

step "Starting two workers: mapd-worker, 2 CPU devices each (the first measures this host for the cost model, once per host and build)"
WORKER_PIDS=()
for name in worker-a worker-b; do
  "$WORKER" --cpu-devices 2 --memory-per-device 1GiB --hostname "$name" --metrics-listen 127.0.0.1:0 \
    --token-file "$OUT/worker-token" --data-root "$OUT" --work-dir "$OUT/$name" > "$OUT/$name.log" 2>&1 &
  PIDS+=($!); WORKER_PIDS+=($!)
  wait_for "$OUT/$name.log" "registered as" 's/.*\(registered as [^ ]*\).*/\1/p' > /dev/null
  sed -n 's/^mapd-worker: \(measured this host.*\|this host.s calibration.*\)/'"$name"': \1/p' "$OUT/$name.log"
done
"$MAPCTL" workers

step "The plan MAP finds for $MODEL on 4 CPU ranks with $BUDGET each, costed on this host as measured"
"$MAPCTL" plan "$MODEL" --devices 4 --device-type auto --memory-per-device "$BUDGET" | sed -n '/^Mesh:/,/^Search:/p;/^Baselines/,$p'

step "mapctl submit: $STEPS steps on 4 ranks, byte-level on this repository's docs, $BUDGET per rank"
"$MAPCTL" submit "$MODEL" --ranks 4 --steps "$STEPS" --memory-per-device "$BUDGET" \
  --data "text:corpus.txt" --lr 3e-3 --checkpoint-every 50 --name demo-gpt

step "mapctl watch 1   (the coordinator plans it, places 2 ranks on each worker; they train)"
"$MAPCTL" watch 1

step "mapctl get 1"
"$MAPCTL" get 1

step "Metrics (Prometheus text format)"
echo "coordinator: $COORD_METRICS"
for name in worker-a worker-b; do
  echo "$name:    $(sed -n 's/.*metrics on \(http[^ ]*\).*/\1/p' "$OUT/$name.log" | head -1)"
done
URL=$(sed -n 's/.*metrics on \(http[^ ]*\).*/\1/p' "$OUT/worker-a.log" | head -1)
/usr/bin/python3 - "$URL" "$COORD_METRICS" <<'PY'
import sys, urllib.request
worker = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode().splitlines()
coord = urllib.request.urlopen(sys.argv[2], timeout=10).read().decode().splitlines()
want = ("mapd_worker_step{", "mapd_worker_step_seconds_sum", "mapd_worker_step_seconds_count", "mapd_worker_tokens_total",
        "mapd_worker_model_flops_utilization_ratio", "mapd_worker_memory_peak_bytes", "mapd_worker_predicted_peak_bytes",
        "mapd_worker_collective_seconds_total")
print("worker-a, rank 0:")
for line in worker:
    if line.startswith(want) and 'rank="0"' in line:
        print("  " + line)
print("coordinator:")
for line in coord:
    if line.startswith(("mapd_jobs{", "mapd_workers{")) and not line.endswith(" 0"):
        print("  " + line)
PY

step "Shutting down (SIGTERM: workers, then mapd)"
for pid in "${WORKER_PIDS[@]}"; do kill -TERM "$pid"; done
for pid in "${WORKER_PIDS[@]}"; do wait "$pid" && echo "mapd-worker $pid exited 0"; done
kill -TERM "$MAPD_PID"; wait "$MAPD_PID" && echo "mapd exited 0"
PIDS=()
echo "Jobs and their events stay in $OUT/jobs.db; the job's checkpoints in $OUT/checkpoints/job-1."
