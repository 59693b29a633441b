#!/usr/bin/env bash
# bench/scale.sh: the write path at scale, with fill and measurement as separate steps. A cluster
# lives in DIR/NAME (badger dirs, logs, pids) and outlives each call, so a 10M-key fill is done once,
# in key ranges (each call short enough for a measurement window), and measured many times.
#
#   bench/scale.sh DIR build                        kvnode and kvctl of this tree into DIR/bin
#   bench/scale.sh DIR start NAME NODES BASE        NODES (1 or 3) founders, --replicas 3 capped by NODES,
#                                                   ports BASE+11.. (gRPC), BASE+21.. (HTTP), BASE+31.. (admin);
#                                                   an existing DIR/NAME is reopened, not refilled;
#                                                   NODE_FLAGS adds kvnode flags (--value-threshold 1K)
#   bench/scale.sh DIR fill NAME START END [SIZE]   kvctl bench fill of keys keySTART..keyEND-1 (SIZE-byte values,
#                                                   default 100), its rate, and the cluster's size on disk
#   bench/scale.sh DIR measure NAME KEYS [SIZE] [ROUNDS]
#                                                   ROUNDS (default 3) rounds of: closed-loop PUT and GET (kvctl bench
#                                                   --target http --rate 0 -c64, uniform over key0..keyKEYS-1, 2 s
#                                                   warm-up then DURATION), with the nodes' CPU (user+system from /proc)
#                                                   per request; then the open model at 60% of the median closed-loop
#                                                   rate (kvctl bench --rate) for PUT and GET; medians at the end
#   bench/scale.sh DIR settled NAME KEYS [SIZE] [ROUNDS]
#                                                   the CPU a PUT costs with the compactions it causes: per round,
#                                                   wait until the nodes idle (< IDLE cores over 5 s, default 0.15;
#                                                   at most 5 min), a closed-loop PUT -c64 (uniform over KEYS keys)
#                                                   for DURATION, then wait until they idle again: CPU per PUT within
#                                                   the load and until idle (amortised); then the open model at 60%
#                                                   of that round's closed rate (kvctl bench --rate, PUT, 2 s warm-up
#                                                   then DURATION) and idle again: its p99 on a settled store;
#                                                   SIGSTOP the other clusters
#   bench/scale.sh DIR disk NAME                    bytes on disk per node (du) and badger's table count
#   bench/scale.sh DIR idle NAME [SECONDS]          the nodes' CPU with no load (compactions still due)
#   bench/scale.sh DIR stop NAME                    SIGTERM the nodes and wait; the data stays (rm -rf DIR/NAME)
# Env: DURATION (default 10s). Nothing is pinned.
set -euo pipefail

dir=${1:?usage: bench/scale.sh DIR build|start|fill|measure|settled|disk|idle|stop ...}
cmd=${2:?usage: bench/scale.sh DIR build|start|fill|measure|settled|disk|idle|stop ...}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
kvnode=$dir/bin/kvnode kvctl=$dir/bin/kvctl
duration=${DURATION:-10s}

# addresses NAME: sets grpc, http (node 1) and pids from DIR/NAME/cluster.
addresses() {
	[[ -f $dir/$1/cluster ]] || { echo "scale.sh: no cluster $1 in $dir (start it)" >&2; exit 1; }
	# shellcheck source=/dev/null
	. "$dir/$1/cluster"
}


# bench OP RATE DURATION WARMUP JSON: kvctl bench against node 1's HTTP API (-c 64, uniform over
# key0..key<keys-1> of size-byte values; rate 0 = closed loop), its JSON into JSON.
bench() {
	"$kvctl" --addr "$grpc" bench --target http --http "$http" --rate "$2" -c 64 --workload "$1" \
		--keys "$keys" --key-prefix key --value-size "$size" --duration "$3" --warmup "$4" --quiet --json \
		--max-errors 100 --events=false >"$5" || true
}

# result FILE: kvctl bench's JSON as one RESULT line.
result() {
	python3 - "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
p = {x["p"]: x["ms"] * 1000 for x in r["latency"]["percentiles"]}
print("RESULT rps=%.0f requests=%d p50_us=%.0f p99_us=%.0f p999_us=%.0f max_us=%.0f errors=%d not_found=%d invalid=%s" % (
    r["rate_achieved"], r["requests"], p[50], p[99], p[99.9], r["latency"]["max_ms"] * 1000,
    sum(r["errors"].values()), r["not_found"], r["invalid"]))
EOF
}

disk() {
	local n
	for n in "$dir/$1"/n*/; do
		printf '%s %s bytes, %s .sst, %s .vlog\n' "$(basename "$n")" "$(du -sb "$n" | cut -f1)" \
			"$(find "$n" -name '*.sst' | wc -l)" "$(find "$n" -name '*.vlog' | wc -l)"
	done
}

case $cmd in
build)
	mkdir -p "$dir/bin"
	(cd "$root" && go build -o "$kvnode" ./cmd/kvnode && go build -o "$kvctl" ./cmd/kvctl)
	;;
start)
	name=$1 n=$2 b=$3 peers="" pids=""
	mkdir -p "$dir/$name"
	for i in $(seq 1 "$n"); do peers+="${peers:+,}n$i=127.0.0.1:$((b + 10 + i))"; done
	for i in $(seq 1 "$n"); do
		setsid "$kvnode" --id "n$i" --data "$dir/$name/n$i" --replicas 3 --peers "$peers" \
			--grpc "127.0.0.1:$((b + 10 + i))" --http "127.0.0.1:$((b + 20 + i))" \
			--admin "127.0.0.1:$((b + 30 + i))" ${NODE_FLAGS:-} >>"$dir/$name/n$i.log" 2>&1 </dev/null &
		pids+="${pids:+ }$!"
	done
	printf 'grpc=127.0.0.1:%d\nhttp=127.0.0.1:%d\npids="%s"\nnodes=%d\n' $((b + 11)) $((b + 21)) "$pids" "$n" >"$dir/$name/cluster"
	deadline=$((SECONDS + 120))
	until curl -fs -o /dev/null -X PUT --data x "http://127.0.0.1:$((b + 21))/v0/entity?id=settle&ack=$n&from=$n"; do
		((SECONDS < deadline)) || { echo "scale.sh: $name not ready after 120 s" >&2; tail -n 20 "$dir/$name"/n*.log >&2; exit 1; }
		sleep 0.5
	done
	echo "$name: $n node(s) up, grpc 127.0.0.1:$((b + 11)) http 127.0.0.1:$((b + 21)), pids $pids"
	;;
fill)
	name=$1 start=$2 end=$3 size=${4:-100}
	addresses "$name"
	t0=$SECONDS c0=$(cpu_ticks $pids)
	"$kvctl" --addr "$grpc" bench fill --keys "$end" --start "$start" --key-prefix key --value-size "$size"
	c1=$(cpu_ticks $pids)
	echo "fill $name key$start..key$((end - 1)) ($size B): $((end - start)) keys in $((SECONDS - t0)) s," \
		"nodes' CPU $(awk -v c=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v n=$((end - start)) 'BEGIN {printf "%.0f", c / hz * 1e6 / n}') core-µs per key; $(uptime | sed 's/.*load/load/')"
	disk "$name"
	;;
measure)
	name=$1 keys=$2 size=${3:-100} rounds=${4:-3}
	addresses "$name"
	out=$dir/$name/measure.$(date +%H%M%S)
	mkdir -p "$out"
	hz=$(getconf CLK_TCK)
	echo "# $name: $nodes node(s), $keys keys of $size B, $rounds round(s) of $duration; $(uptime | sed 's/.*load/load/')"
	# The nodes' CPU with no load (badger's compactions still due): the debt a measurement shares.
	c0=$(cpu_ticks $pids)
	sleep 5
	echo "# $name idle: $(awk -v c=$(($(cpu_ticks $pids) - c0)) -v hz="$hz" 'BEGIN {printf "%.2f", c / hz / 5}') cores over 5 s before the load"
	for r in $(seq 1 "$rounds"); do
		for op in put get; do
			bench "$op" 0 2s 0s "$out/warm.json"
			c0=$(cpu_ticks $pids)
			bench "$op" 0 "$duration" 0s "$out/closed.$op.$r.json"
			c1=$(cpu_ticks $pids)
			line=$(result "$out/closed.$op.$r.json")
			line+=" cpu_us=$(awk -v c=$((c1 - c0)) -v hz="$hz" -v n="$(echo "$line" | sed -E 's/.* requests=([0-9]+).*/\1/')" 'BEGIN {printf "%.0f", c / hz * 1e6 / n}')"
			echo "$line" >>"$out/closed.$op"
			echo "round $r closed $op $line ($(uptime | sed 's/.*load/load/'))"
		done
	done
	for op in put get; do
		rate=$(field rps "$out/closed.$op" | median | awk '{printf "%.0f", $1 * 0.6}')
		for r in $(seq 1 "$rounds"); do
			c0=$(cpu_ticks $pids)
			bench "$op" "$rate" "$duration" 2s "$out/open.$op.$r.json"
			c1=$(cpu_ticks $pids)
			line="$(result "$out/open.$op.$r.json") rate=$rate"
			echo "$line" >>"$out/open.$op"
			echo "round $r open $op $line ($(uptime | sed 's/.*load/load/'))"
		done
	done
	echo "## $name: $nodes node(s), $keys keys of $size B: medians of $rounds round(s)"
	for op in put get; do
		echo "$op closed -c64: rps=$(field rps "$out/closed.$op" | median) p99_us=$(field p99_us "$out/closed.$op" | median)" \
			"cpu_us_per_req=$(field cpu_us "$out/closed.$op" | median) (rounds: $(field cpu_us "$out/closed.$op" | tr '\n' ' '))"
		echo "$op open at $(field rate "$out/open.$op" | head -1)/s: p50_us=$(field p50_us "$out/open.$op" | median)" \
			"p99_us=$(field p99_us "$out/open.$op" | median) p999_us=$(field p999_us "$out/open.$op" | median)" \
			"(p99 rounds: $(field p99_us "$out/open.$op" | tr '\n' ' '); errors $(field errors "$out/open.$op" | tr '\n' ' '))"
	done
	c0=$(cpu_ticks $pids)
	sleep 5
	echo "# $name idle: $(awk -v c=$(($(cpu_ticks $pids) - c0)) -v hz="$hz" 'BEGIN {printf "%.2f", c / hz / 5}') cores over 5 s after the load"
	disk "$name"
	;;
settled)
	name=$1 keys=$2 size=${3:-100} rounds=${4:-3}
	addresses "$name"
	out=$dir/$name/settled.$(date +%H%M%S)
	mkdir -p "$out"
	hz=$(getconf CLK_TCK)
	echo "# $name: $keys keys of $size B, $rounds round(s) of $duration; $(uptime | sed 's/.*load/load/')"
	for r in $(seq 1 "$rounds"); do
		echo "# round $r: idle before at $(idle_wait "${IDLE:-0.15}" 60 $pids) cores"
		t0=$(date +%s) c0=$(cpu_ticks $pids)
		bench put 0 "$duration" 0s "$out/put.$r.json"
		c1=$(cpu_ticks $pids)
		settle=$(idle_wait "${IDLE:-0.15}" 60 $pids)
		t2=$(date +%s) c2=$(cpu_ticks $pids)
		line=$(result "$out/put.$r.json")
		n=$(echo "$line" | sed -E 's/.* requests=([0-9]+).*/\1/')
		line+=" cpu_us=$(awk -v c=$((c1 - c0)) -v hz="$hz" -v n="$n" 'BEGIN {printf "%.0f", c / hz * 1e6 / n}')"
		line+=" settled_cpu_us=$(awk -v c=$((c2 - c0)) -v hz="$hz" -v n="$n" 'BEGIN {printf "%.0f", c / hz * 1e6 / n}')"
		line+=" settle_s=$((t2 - t0))"
		rate=$(echo "$line" | sed -E 's/.*RESULT rps=([0-9]+).*/\1/' | awk '{printf "%.0f", $1 * 0.6}')
		bench put "$rate" "$duration" 2s "$out/open.$r.json"
		open=$(result "$out/open.$r.json")
		line+=" open_rate=$rate open_p50_us=$(echo "$open" | sed -E 's/.* p50_us=([^ ]+).*/\1/')"
		line+=" open_p99_us=$(echo "$open" | sed -E 's/.* p99_us=([^ ]+).*/\1/')"
		line+=" open_errors=$(echo "$open" | sed -E 's/.* errors=([^ ]+).*/\1/') open_invalid=$(echo "$open" | sed -E 's/.* invalid=([^ ]+).*/\1/')"
		echo "$line" >>"$out/put"
		echo "round $r $line (idle after the closed load at $settle cores, after the open at $(idle_wait "${IDLE:-0.15}" 60 $pids); $(uptime | sed 's/.*load/load/'))"
	done
	echo "## $name: $keys keys of $size B, PUT -c64 closed loop, medians of $rounds round(s):" \
		"rps=$(field rps "$out/put" | median) p99_us=$(field p99_us "$out/put" | median)" \
		"cpu_us_per_req=$(field cpu_us "$out/put" | median) settled_cpu_us_per_req=$(field settled_cpu_us "$out/put" | median)" \
		"(settled rounds: $(field settled_cpu_us "$out/put" | tr '\n' ' '))" \
		"open PUT at 60%: p99_us=$(field open_p99_us "$out/put" | median) (rounds: $(field open_p99_us "$out/put" | tr '\n' ' ');" \
		"invalid: $(field open_invalid "$out/put" | tr '\n' ' '))"
	;;
disk)
	disk "$1"
	;;
idle)
	addresses "$1"
	c0=$(cpu_ticks $pids)
	sleep "${2:-10}"
	echo "$1 idle: $(awk -v c=$(($(cpu_ticks $pids) - c0)) -v hz="$(getconf CLK_TCK)" -v d="${2:-10}" 'BEGIN {printf "%.2f", c / hz / d}') cores over ${2:-10} s"
	;;
stop)
	addresses "$1"
	kill -TERM $pids 2>/dev/null || true
	for p in $pids; do while kill -0 "$p" 2>/dev/null; do sleep 0.2; done; done
	echo "$1 stopped"
	;;
*)
	echo "scale.sh: unknown command $cmd" >&2
	exit 2
	;;
esac
