#!/usr/bin/env bash
# One ring add under client load, as docs/bench.md "The default pace of a ring change" ran it:
# three kvnode founders and an empty n4, KEYS keys of 1 KiB, kvctl bench --rate 1000 mixed
# 50/50 running, and `kvctl ring add n4` with default flags 15 s in. MODE is the kvnodes'
# --move-latency-target: auto (the default) or off (the old default).
#   bench/pace.sh auto|off OUTDIR     (env: KEYS=150000, RATE=1000, KVNODE, KVCTL: the binaries)
# With SEED=DIR the filled data directories are kept in DIR after the first run (the nodes
# stopped gracefully first) and copied from there by later runs, which skip the fill.
set -euo pipefail
mode=$1 out=$2
keys=${KEYS:-150000} rate=${RATE:-1000} seed=${SEED:-}
kvnode=${KVNODE:-kvnode} kvctl=${KVCTL:-kvctl}
mkdir -p "$out"
dir=$(mktemp -d /tmp/ringkv-pace.XXXXXX)
base=$((20000 + (RANDOM % 400) * 40))
if [ -n "$seed" ]; then base=23000; fi # raft keeps the founders' addresses
grpc() { echo "127.0.0.1:$((base + $1))"; }
peers="n1=$(grpc 1),n2=$(grpc 2),n3=$(grpc 3)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
start_nodes() {
pids=()
for i in 1 2 3 4; do
  flags=(--id "n$i" --data "$dir/n$i" --grpc "$(grpc $i)" --http "127.0.0.1:$((base + 10 + i))" --admin "127.0.0.1:$((base + 20 + i))")
  if [ "$i" -le 3 ]; then flags+=(--peers "$peers"); fi
  if [ "$mode" = off ]; then flags+=(--move-latency-target off); fi
  "$kvnode" "${flags[@]}" >"$out/n$i.log" 2>&1 &
  pids+=($!)
done
for i in 1 2 3; do
  for _ in $(seq 120); do curl -sf "http://127.0.0.1:$((base + 20 + i))/readyz" >/dev/null && break; sleep 0.5; done
done
}
addrs="$(grpc 1),$(grpc 2),$(grpc 3)"
if [ -n "$seed" ] && [ -d "$seed/n1" ]; then
  cp -a "$seed"/. "$dir"/
  start_nodes
else
  start_nodes
  # A few failed writes of the fill (a loaded machine) leave a few keys absent: not a reason
  # to stop.
  "$kvctl" --addr "$addrs" bench fill --keys "$keys" --value-size 1024 >"$out/fill.txt" 2>&1 || tail -1 "$out/fill.txt"
  if [ -n "$seed" ]; then
    kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
    mkdir -p "$seed"; cp -a "$dir"/. "$seed"/
    start_nodes
  fi
fi
echo "load before the run: $(uptime)" | tee "$out/uptime.txt"
"$kvctl" --addr "$addrs" bench --rate "$rate" --duration 45s --warmup 5s --workload mixed:get=50,put=50 \
  --keys "$keys" --value-size 1024 --connections 16 --quiet -o json >"$out/run.json" 2>"$out/bench.err" &
bench=$!
sleep 20
echo "load at the add: $(uptime)" | tee -a "$out/uptime.txt"
start=$(date +%s.%N)
"$kvctl" --addr "$(grpc 1)" ring add "n4=$(grpc 4)" --yes -o json >"$out/add.json" 2>"$out/add.err"
end=$(date +%s.%N)
echo "ring add took $(echo "$end - $start" | bc) s" | tee "$out/add.txt"
wait "$bench"
echo "load after the run: $(uptime)" | tee -a "$out/uptime.txt"
