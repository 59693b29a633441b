#!/usr/bin/env bash
# bench/hint-drain.sh: how fast a coordinator hands its hints over to a peer that is back.
# Three kvnode processes on loopback (RF=3, fresh temp data dirs); n3 is killed with -9;
# kvctl bench writes RATE ack=2 PUTs a second for DURATION through n1, which keeps a hint for
# n3 of each; n3 is started again, and the time until n1's HINTS column (kvctl status) reads 0
# is printed, n3's start included. With BASELINE=REV a kvnode built from that revision runs
# too, alternating with this tree's, ROUNDS times.
#
#   bench/hint-drain.sh                       this tree, 3 rounds
#   BASELINE=3431ce7 bench/hint-drain.sh      that revision and this tree, alternating
#
# Env: RATE (3000), DURATION (10s), ROUNDS (3), BASE_PORT (27100).
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${RATE:-3000} dur=${DURATION:-10s} rounds=${ROUNDS:-3} port=${BASE_PORT:-27100}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

go build -o "$tmp/kvctl" ./cmd/kvctl
go build -o "$tmp/kvnode-this" ./cmd/kvnode
builds=(this)
if [ -n "${BASELINE:-}" ]; then
  git worktree add -q --detach "$tmp/base-src" "$BASELINE"
  (cd "$tmp/base-src" && go build -o "$tmp/kvnode-base" ./cmd/kvnode)
  git worktree remove --force "$tmp/base-src"
  builds=(base this)
fi
kvctl() { "$tmp/kvctl" --addr "127.0.0.1:$((port + 1))" "$@"; }
peers="n1=127.0.0.1:$((port + 1)),n2=127.0.0.1:$((port + 2)),n3=127.0.0.1:$((port + 3))"

start() { # build, node number, data dir
  "$tmp/kvnode-$1" --id "n$2" --data "$3/n$2" --grpc "127.0.0.1:$((port + $2))" \
    --http "127.0.0.1:$((port + 10 + $2))" --admin "127.0.0.1:$((port + 20 + $2))" \
    --peers "$peers" --replicas 3 --vnodes 32 --replica-timeout 500ms >"$3/n$2.log" 2>&1 &
  pids+=($!)
  eval "pid$2=$!"
}
hints() { kvctl status 2>/dev/null | awk -F'\t' '$1=="n1"{print $11}'; }

for r in $(seq "$rounds"); do
  for b in "${builds[@]}"; do
    d="$tmp/$b-$r"; mkdir -p "$d"
    for i in 1 2 3; do start "$b" "$i" "$d"; done
    for _ in $(seq 100); do kvctl status >/dev/null 2>&1 && break; sleep 0.2; done
    sleep 2
    kill -9 "$pid3"; wait "$pid3" 2>/dev/null || true; sleep 1
    if ! kvctl bench --rate "$rate" --duration "$dur" --warmup 0s --workload put --key-dist sequential \
      --keys 100000000 --ack 2 --from 3 --connections 32 >"$d/bench.out" 2>&1; then
      echo "round $r $b: kvctl bench failed:"; tail -3 "$d/bench.out"; exit 1
    fi
    held=$(hints)
    t0=$(date +%s.%N)
    start "$b" 3 "$d"
    for _ in $(seq 1200); do [ "$(hints)" = 0 ] && break; sleep 0.05; done
    t1=$(date +%s.%N)
    [ "$(hints)" = 0 ] || { echo "round $r $b: hints not drained after 60 s: $(hints)"; exit 1; }
    echo "round $r $b: n1 held ${held%% *} hints ${held#* } for n3; drained in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s (n3's start included); load $(cut -d' ' -f1 /proc/loadavg)"
    kill "$pid1" "$pid2" "$pid3" 2>/dev/null || true
    wait "$pid1" "$pid2" "$pid3" 2>/dev/null || true
  done
done
