#!/usr/bin/env bash
# bench/run.sh: builds kvnode and kvctl, starts 1 or 3 kvnode processes on loopback with
# badger in fresh temp data dirs, runs a load, prints the figures, and tears everything down.
#
#   bench/run.sh [options] wrk              wrk -s bench/SCRIPT.lua against node 1's HTTP API, ROUNDS rounds
#   bench/run.sh [options] ratio            a 1-node and a 3-node cluster side by side: alternate wrk between
#                                           them, ROUNDS rounds; per-round and median 3-node/1-node rate ratio
#   bench/run.sh [options] hotkeys          two clusters of NODES nodes side by side, one with --hot-keys=false:
#                                           alternate wrk between them, ROUNDS rounds; per-round and median
#                                           on/off ratios of rate and of the clusters' CPU time per request
#                                           (what the hot keys summary costs a request)
#   bench/run.sh [options] agree            1 node: alternate wrk and kvctl bench --target http --rate 0
#                                           (same connections, GET of pre-filled keys), ROUNDS rounds
#   bench/run.sh [options] cpu              1 node: CPU time (perf stat task-clock; needs perf) per request of wrk and
#                                           of kvctl bench --target http --rate 0, generator pinned, ROUNDS rounds
#   bench/run.sh [options] kvctl -- ARGS    kvctl --addr <node 1> bench ARGS (e.g. --rate 2000 --workload ...)
#   bench/run.sh [options] shell            start the cluster, print its addresses, wait for Ctrl-C
#   bench/run.sh [options] compare          the write-path comparison table: ringkv 3 nodes RF=3, ringkv 1 node, ringkv 3 nodes
#                                           --sync-writes and etcd 3 members (Debian etcd-server, installed with
#                                           apt-get when missing) side by side, ROUNDS rounds alternating the order:
#                                           wrk closed loop -c16/-c64 PUT and GET, then open model at 60% of the
#                                           3-node closed-loop max with vegeta and kvctl bench --rate at the same
#                                           rates, each open round once every server idles (< IDLE cores, default
#                                           0.3); prints the ratio table (-c is ignored; -s too)
#
# Options:
#   -n NODES     1 or 3 kvnode processes (default 3; agree always uses 1); --replicas 3 capped by NODES
#   -s SCRIPT    wrk script: put, get or mixed (default mixed)
#   -c CONNS     connections of wrk and kvctl (default 16)
#   -t THREADS   wrk threads (default 1: one generator CPU)
#   -d DURATION  measured duration of each round (default 10s); a 2 s warm-up precedes every round
#   -r ROUNDS    rounds (default 3); the summary prints the median of each figure
#   -k KEYS      keyspace key0..key<KEYS-1>, filled before GET and mixed runs (default 100000)
#   -P           do not pin (default: nodes on NODE_CPUS, generator on LOAD_CPUS via taskset)
# Env: NODE_CPUS (default 0), LOAD_CPUS (default 1), BASE_PORT (default 23000), KEEP=1 keeps the temp dir,
#      KVCTL_ARGS extra kvctl bench flags in agree (e.g. --spin=50us).
#      hotkeys: OFF_FLAGS replaces the second cluster's --hot-keys=false (OFF_FLAGS= runs both with
#      hot keys on: the same-setup ratio, the noise floor of the on/off one).
#      compare: PROFILE=DIR captures kvctl pprof cpu --all --top during round 1's 3-node PUT -c64;
#      GCTRACE=1 runs the kvnodes with GODEBUG=gctrace=1 and summarizes their GCs; VEGETA=path;
#      BASELINE=REV adds a 3-node --sync-writes cluster of kvnode built from git REV (git archive),
#      run beside the others in every round (setup "base").
set -euo pipefail

nodes=3 script=mixed conns=16 threads=1 duration=10s rounds=3 keys=100000 pin=1
usage() { sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; }
while getopts "n:s:c:t:d:r:k:Ph" opt; do
	case $opt in
	n) nodes=$OPTARG ;;
	s) script=$OPTARG ;;
	c) conns=$OPTARG ;;
	t) threads=$OPTARG ;;
	d) duration=$OPTARG ;;
	r) rounds=$OPTARG ;;
	k) keys=$OPTARG ;;
	P) pin=0 ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
mode=${1:-}
[[ $mode =~ ^(wrk|ratio|hotkeys|agree|cpu|kvctl|shell|compare)$ ]] || { usage >&2; exit 2; }
shift
[[ ${1:-} == -- ]] && shift
[[ $mode == agree || $mode == cpu ]] && nodes=1
[[ $nodes == 1 || $nodes == 3 ]] || { echo "run.sh: -n must be 1 or 3" >&2; exit 2; }

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
node_cpus=${NODE_CPUS:-0} load_cpus=${LOAD_CPUS:-1} base=${BASE_PORT:-23000}
tmp=$(mktemp -d /tmp/ringkv-bench.XXXXXX)
pids=()

teardown() {
	local p
	for p in "${pids[@]}"; do
		if ! kill -0 "$p" 2>/dev/null; then
			echo "run.sh: kvnode pid $p had exited before the teardown; last log lines:" >&2
			tail -n 5 "$tmp"/*.log >&2
		fi
	done
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	# A stopping process may linger (an etcd leader hands over first): 15 s, then KILL.
	local deadline=$((SECONDS + 15)) left
	while :; do
		left=()
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && left+=("$p"); done
		((${#left[@]} == 0 || SECONDS > deadline)) && break
		sleep 0.2
	done
	for p in "${left[@]}"; do
		echo "run.sh: pid $p still running 15 s after SIGTERM; SIGKILL" >&2
		kill -KILL "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	if [[ ${KEEP:-0} == 1 ]]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap teardown EXIT
trap 'exit 130' INT TERM

# onnode runs in a background subshell (cmd &): exec, so that $! is the kvnode process itself.
onnode() {
	if [[ ${GCTRACE:-0} == 1 && $1 == "$kvnode" ]]; then export GODEBUG=gctrace=1; fi
	if ((pin)); then exec taskset -c "$node_cpus" "$@"; else exec "$@"; fi
}
onload() { if ((pin)); then taskset -c "$load_cpus" "$@"; else "$@"; fi; }

echo "# build" >&2
(cd "$root" && go build -o "$tmp/bin/kvnode" ./cmd/kvnode && go build -o "$tmp/bin/kvctl" ./cmd/kvctl)
kvnode=$tmp/bin/kvnode kvctl=$tmp/bin/kvctl

# start_cluster NAME NODES BASE [KVNODE-FLAGS]: NODES founders with ports BASE+11.., BASE+21.., BASE+31..;
# sets NAME_grpc and NAME_http to node 1's addresses and NAME_pids to their pids, and waits until
# a write reaches every replica.
start_cluster() {
	local name=$1 n=$2 b=$3 extra=${4:-} peers="" i
	for i in $(seq 1 "$n"); do peers+="${peers:+,}n$i=127.0.0.1:$((b + 10 + i))"; done
	for i in $(seq 1 "$n"); do
		onnode "$kvnode" --id "n$i" --data "$tmp/$name/n$i" --replicas 3 --peers "$peers" \
			--grpc "127.0.0.1:$((b + 10 + i))" --http "127.0.0.1:$((b + 20 + i))" \
			--admin "127.0.0.1:$((b + 30 + i))" $extra >"$tmp/$name.n$i.log" 2>&1 &
		pids+=($!)
	done
	printf -v "${name}_pids" '%s' "${pids[*]: -$n}"
	printf -v "${name}_grpc" '%s' "127.0.0.1:$((b + 11))"
	printf -v "${name}_http" '%s' "127.0.0.1:$((b + 21))"
	local admins=""
	for i in $(seq 1 "$n"); do admins+="${admins:+ }127.0.0.1:$((b + 30 + i))"; done
	printf -v "${name}_admins" '%s' "$admins"
	local deadline=$((SECONDS + 30)) p
	until curl -fs -o /dev/null -X PUT --data x "http://127.0.0.1:$((b + 21))/v0/entity?id=settle&ack=$n&from=$n"; do
		if ((SECONDS > deadline)); then
			echo "run.sh: $name not ready after 30 s; logs:" >&2; tail -n 20 "$tmp/$name".n*.log >&2; exit 1
		fi
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || { tail -n 20 "$tmp"/*.log >&2; exit 1; }; done
		sleep 0.2
	done
	local where
	if ((pin)); then where="pinned: nodes on CPU $node_cpus, load on CPU $load_cpus"; else where="not pinned"; fi
	echo "# $name: $n node(s) up, grpc 127.0.0.1:$((b + 11)) http 127.0.0.1:$((b + 21)); $where" >&2
}

# start_etcd NAME BASE: 3 etcd members, client ports BASE+11.., peer ports BASE+21..; sets
# NAME_http to member 1's client URL (host:port) and waits until a put is committed.
start_etcd() {
	local name=$1 b=$2 cluster="" i
	if ! command -v etcd >/dev/null; then
		echo "# installing Debian's etcd-server" >&2
		apt-get install -y -qq etcd-server >&2 || { apt-get update -qq >&2 && apt-get install -y -qq etcd-server >&2; }
	fi
	for i in 1 2 3; do cluster+="${cluster:+,}e$i=http://127.0.0.1:$((b + 20 + i))"; done
	for i in 1 2 3; do
		onnode etcd --name "e$i" --data-dir "$tmp/$name/e$i" \
			--listen-client-urls "http://127.0.0.1:$((b + 10 + i))" --advertise-client-urls "http://127.0.0.1:$((b + 10 + i))" \
			--listen-peer-urls "http://127.0.0.1:$((b + 20 + i))" --initial-advertise-peer-urls "http://127.0.0.1:$((b + 20 + i))" \
			--initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "ringkv-bench-$b" \
			--log-level error --logger zap >"$tmp/$name.e$i.log" 2>&1 &
		pids+=($!)
	done
	printf -v "${name}_http" '%s' "127.0.0.1:$((b + 11))"
	printf -v "${name}_pids" '%s' "${pids[*]: -3}"
	local deadline=$((SECONDS + 30))
	until curl -fs -o /dev/null -X POST -d '{"key":"c2V0dGxl","value":"eA=="}' "http://127.0.0.1:$((b + 11))/v3/kv/put"; do
		if ((SECONDS > deadline)); then
			echo "run.sh: etcd not ready after 30 s; logs:" >&2; tail -n 20 "$tmp/$name".e*.log >&2; exit 1
		fi
		sleep 0.2
	done
	echo "# $name: etcd $(etcd --version | head -1 | sed 's/.*: //') 3 members up, client http://127.0.0.1:$((b + 11))" >&2
}

if [[ $mode == ratio ]]; then
	start_cluster one 1 "$base"
	start_cluster three 3 "$((base + 100))"
elif [[ $mode == hotkeys ]]; then
	start_cluster on "$nodes" "$base"
	start_cluster off "$nodes" "$((base + 100))" "${OFF_FLAGS---hot-keys=false}"
elif [[ $mode == compare ]]; then
	start_cluster one 1 "$base"
	start_cluster three 3 "$((base + 100))"
	start_cluster sync 3 "$((base + 200))" --sync-writes
	start_etcd etcd "$((base + 300))"
	if [[ -n ${BASELINE:-} ]]; then
		echo "# build kvnode at $BASELINE" >&2
		mkdir -p "$tmp/baseline"
		(cd "$root" && git archive "$BASELINE") | tar -x -C "$tmp/baseline"
		(cd "$tmp/baseline" && go build -o "$tmp/bin/kvnode-base" ./cmd/kvnode)
		cur=$kvnode kvnode=$tmp/bin/kvnode-base
		start_cluster base 3 "$((base + 400))" --sync-writes
		kvnode=$cur
	fi
else
	start_cluster main "$nodes" "$base"
	grpc=$main_grpc http=$main_http
fi

fill() { # [grpc-addr]
	echo "# fill key0..key$((keys - 1)) at ${1:-$grpc}" >&2
	"$kvctl" --addr "${1:-$grpc}" bench fill --keys "$keys" --key-prefix key >&2
}

# nodesnap SETUP: one line per node of SETUP (a start_cluster name): CPU ticks, write syscalls
# (/proc/PID/io syscw), goroutines created (runtime/metrics via /metrics), batch messages and
# items it sent to peers (na when the node does not export them).
nodesnap() {
	local pv=${1}_pids av=${1}_admins p a i=0
	local -a ps=(${!pv}) as=(${!av})
	for p in "${ps[@]}"; do
		a=${as[$i]} i=$((i + 1))
		curl -fs "http://$a/metrics" 2>/dev/null | awk -v t="$(awk '{print $14 + $15}' "/proc/$p/stat")" \
			-v w="$(awk '/^syscw/ {print $2}' "/proc/$p/io")" '
			/^go_sched_goroutines_created_goroutines_total / {g = $2}
			/^ringkv_replica_batch_messages_total / {m = $2}
			/^ringkv_replica_batch_items_total / {it = $2}
			END {printf "%s %s %s %s %s\n", t, w, (g == "" ? "na" : g), (m == "" ? "na" : m), (it == "" ? "na" : it)}'
	done
}

# nodediff BEFORE AFTER REQUESTS: per node, from two nodesnap outputs: n<i>_cpu_us, n<i>_syscw
# and n<i>_gor per request; and, summed over nodes, items per batch message.
nodediff() {
	paste -d' ' <(echo "$1") <(echo "$2") | awk -v n="$3" -v hz="$(getconf CLK_TCK)" '
		function d(a, b) { return (a == "na" || b == "na") ? "na" : b - a }
		{ i++; c = d($1, $6); w = d($2, $7); g = d($3, $8); m = d($4, $9); it = d($5, $10)
		  printf " n%d_cpu_us=%.0f n%d_syscw=%.2f n%d_gor=%s", i, c / hz * 1e6 / n, i, w / n, i, (g == "na" ? "na" : sprintf("%.2f", g / n))
		  if (m != "na") { M += m; I += it } }
		END { printf " items_per_batch=%s batches_per_req=%s\n", (M > 0 ? sprintf("%.2f", I / M) : "na"), (M > 0 ? sprintf("%.3f", M / n) : "na") }'
}

run_wrk() { # out-file script duration [http-addr [conns]]
	KEYS=$keys HIST=$1.hist onload wrk -t"$threads" -c"${5:-$conns}" -d"$3" --latency -s "$root/bench/$2.lua" "http://${4:-$http}" >"$1"
}

run_kvctl_get() { # out-file
	onload "$kvctl" --addr "$grpc" bench --target http --http "$http" --rate 0 -c "$conns" \
		--workload get --keys "$keys" --key-prefix key --duration "$duration" --warmup 2s --quiet --json --hist "$1.hist" \
		${KVCTL_ARGS:-} >"$1"
}

# hist_figures TOOL FILE: figures of a whole 1 µs histogram ("µs count" lines) from wrk (HIST= of
# bench/common.lua: wrk's histogram after its correction, with a "# duration_us= requests=" line)
# or kvctl (--hist: raw). wrk 4.x corrects its closed-loop histogram before printing (stats_correct
# in wrk.c: with interval = runtime / (requests / connections), each sample v >= 2*interval adds
# phantom samples v - interval, v - 2*interval, ... > interval). The correction is exactly
# invertible, so both tools are shown both ways: raw_* = without it (wrk's undone, checked by
# redoing it), wrkcorr_* = with it (kvctl's applied, with kvctl's own interval). Percentiles are
# wrk's (stats_percentile) for both. kvctl's buckets are HdrHistogram's (1 µs below ~1 ms, then
# 0.1% wide), truncated to µs.
hist_figures() { # tool file [duration_s requests]
	python3 - "$1" "$2" "$conns" "${3:-}" "${4:-}" <<'EOF2'
import math, sys
tool, path, conns = sys.argv[1], sys.argv[2], int(sys.argv[3])
h, dur_us, req = {}, None, None
for line in open(path):
    if line.startswith("#"):
        kv = dict(x.split("=") for x in line[1:].split())
        dur_us, req = int(kv["duration_us"]), int(kv["requests"])
    elif line.strip():
        v, n = line.split()
        h[int(v)] = h.get(int(v), 0) + int(n)
if dur_us is None:
    dur_us, req = int(float(sys.argv[4]) * 1e6), int(sys.argv[5])
e = dur_us // (req // conns)
def correct(raw):
    c = dict(raw)
    for n, k in raw.items():
        if n >= 2 * e:
            m = n - e
            while m > e:
                c[m] = c.get(m, 0) + k
                m -= e
    return c
def uncorrect(corr):  # corr[m] = raw[m] + sum over k >= 1 of raw[m + k*e], for m > e
    raw, below = {m: c for m, c in corr.items() if m <= e}, {}
    for m in range(max(corr), e, -1):
        b = raw.get(m + e, 0) + below.get(m + e, 0)
        if b:
            below[m] = b
        if corr.get(m, 0) - b:
            raw[m] = corr.get(m, 0) - b
    return raw
def pct(hh, p):
    rank, acc = math.floor(p / 100 * sum(hh.values()) + 1), 0
    for v in sorted(hh):
        acc += hh[v]
        if acc >= rank:
            return v
if tool == "wrk":
    corr, raw = h, uncorrect(h)
    if min(raw.values()) < 0 or correct(raw) != corr:
        sys.exit("run.sh: undoing wrk's correction of %s does not round-trip" % path)
else:
    raw, corr = h, correct(h)
print("raw_p50_us=%d raw_p99_us=%d raw_mean_us=%.0f wrkcorr_p50_us=%d wrkcorr_p99_us=%d wrkcorr_added=%d interval_us=%d" % (
    pct(raw, 50), pct(raw, 99), sum(v * n for v, n in raw.items()) / sum(raw.values()),
    pct(corr, 50), pct(corr, 99), sum(corr.values()) - sum(raw.values()), e))
EOF2
}

# kvctl JSON (+ its --hist) -> a RESULT line like wrk's, with hist_figures appended.
kvctl_result() {
	local line
	line=$(python3 - "$1" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
p = {x["p"]: x["ms"] * 1000 for x in r["latency"]["percentiles"]}
# uncorr_*: from each request's actual send (what vegeta and wrk report); lag_*: send - intended.
u = {x["p"]: x["ms"] * 1000 for x in r["uncorrected"]["percentiles"]}
g = {x["p"]: x["ms"] * 1000 for x in r["send_lag"]["percentiles"]}
print("RESULT rps=%.0f requests=%d p50_us=%.0f p75_us=%.0f p90_us=%.0f p99_us=%.0f p999_us=%.0f max_us=%.0f mean_us=%.0f cpu=%.2f errors=%d not_found=%d invalid=%s uncorr_p50_us=%.0f uncorr_p99_us=%.0f lag_p99_us=%.0f duration_s=%s" % (
    r["rate_achieved"], r["requests"], p[50], p[75], p[90], p[99], p[99.9], r["latency"]["max_ms"] * 1000,
    r["latency"]["mean_ms"] * 1000, r["generator_cpu"]["cores"], sum(r["errors"].values()), r["not_found"], r["invalid"],
    u[50], u[99], g[99], r["duration_seconds"]))
EOF2
)
	echo "$line $(hist_figures kvctl "$1.hist" "$(echo "$line" | sed -E 's/.* duration_s=([^ ]+).*/\1/')" "$(echo "$line" | sed -E 's/.* requests=([^ ]+).*/\1/')")"
}

summary() { # label file
	printf '%-8s median of %d: rps=%s p50_us=%s p90_us=%s p99_us=%s p999_us=%s\n' "$1" "$(grep -c '^RESULT' "$2")" \
		"$(field rps "$2" | median)" "$(field p50_us "$2" | median)" "$(field p90_us "$2" | median)" \
		"$(field p99_us "$2" | median)" "$(field p999_us "$2" | median)"
}

case $mode in
compare)
	command -v wrk >/dev/null || { echo "# installing wrk" >&2; apt-get install -y -qq wrk >&2; }
	vegeta=${VEGETA:-$(command -v vegeta || echo "$(go env GOPATH)/bin/vegeta")}
	if [[ ! -x $vegeta ]]; then
		echo "# installing vegeta v12.13.0" >&2
		(cd /tmp && go install github.com/tsenart/vegeta/v12@v12.13.0)
		vegeta=$(go env GOPATH)/bin/vegeta
	fi
	# A few failed fill writes (a starved node) leave a few GETs not found, counted as non-2xx.
	fill "$one_grpc" || echo "run.sh: fill of the 1-node cluster incomplete" >&2
	fill "$three_grpc" || echo "run.sh: fill of the 3-node cluster incomplete" >&2
	hz=$(getconf CLK_TCK)
	ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
	# runq PIDS: ns their threads have spent runnable but waiting for a CPU (schedstat field 2;
	# threads that exit within the window are missed), summed over threads: the scheduler's share.
	runq() { local p; for p in "$@"; do cat /proc/"$p"/task/*/schedstat 2>/dev/null; done | awk '{s += $2} END {printf "%.0f", s}'; }
	# closed SETUP OP CONNS ROUND: wrk closed loop, 2 s warm-up; appends a RESULT line (with the
	# setup's server CPU per request, all its processes summed) to closed.SETUP.OP.cCONNS.
	closed() {
		local c=$1 op=$2 n=$3 r=$4 a=${1}_http pv=${1}_pids script=$2 f t0 t1 prof=""
		[[ $c == etcd ]] && script=etcd
		f="$tmp/closed.$c.$op.c$n.$r"
		echo "# round $r $c $op -c$n: $(uptime)" >&2
		OP=$op run_wrk "$tmp/warm" "$script" 2s "${!a}" "$n"
		if [[ -n ${PROFILE:-} && $r == 1 && $c == three && $op == put && $n == 64 ]]; then
			mkdir -p "$PROFILE"
			"$kvctl" --addr "${three_grpc}" pprof cpu --all --seconds "${PROFILE_SECONDS:-3}" --top 25 -d "$PROFILE" >"$tmp/pprof.txt" 2>&1 &
			prof=$!
		fi
		[[ $c == etcd ]] || s0=$(nodesnap "$c")
		t0=$(ticks ${!pv}) q0=$(runq ${!pv})
		OP=$op run_wrk "$f" "$script" "$duration" "${!a}" "$n"
		t1=$(ticks ${!pv}) q1=$(runq ${!pv})
		[[ $c == etcd ]] || s1=$(nodesnap "$c")
		[[ -z $prof ]] || wait "$prof" || true
		line="$(grep '^RESULT' "$f") server_cpu_us_per_req=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$(field requests "$f")" 'BEGIN {printf "%.0f", t / hz * 1e6 / n}')"
		line+=" server_runq_us_per_req=$(awk -v q=$((q1 - q0)) -v n="$(field requests "$f")" 'BEGIN {printf "%.0f", q / 1e3 / n}')"
		[[ $c == etcd ]] || line+="$(nodediff "$s0" "$s1" "$(field requests "$f")")"
		echo "$line" >"$f"
		echo "$line" >>"$tmp/closed.$c.$op.c$n"
		echo "round $r $c $op -c$n $line"
	}
	setups=(three one sync etcd)
	[[ -z ${BASELINE:-} ]] || setups+=(base)
	for r in $(seq 1 "$rounds"); do
		# Rotate the order every round, so each setup meets the noise at every position.
		k=$(((r - 1) % ${#setups[@]}))
		order=("${setups[@]:$k}" "${setups[@]:0:$k}")
		for c in "${order[@]}"; do
			for n in 16 64; do
				closed "$c" put "$n" "$r"
				if [[ $c == three || $c == one ]]; then closed "$c" get "$n" "$r"; fi
			done
		done
	done

	# Open model on the 3-node cluster at 60% of its closed-loop max (median of -c64), vegeta and
	# kvctl bench --rate alternating, same rate, 64 connections each.
	rate_put=$(field rps "$tmp/closed.three.put.c64" | median | awk '{printf "%.0f", $1 * 0.6}')
	rate_get=$(field rps "$tmp/closed.three.get.c64" | median | awk '{printf "%.0f", $1 * 0.6}')
	for op in put get; do
		python3 - "$op" "$three_http" "$keys" "$tmp/targets.$op" <<'EOF2'
import base64, json, random, sys
op, addr, keys, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
body = base64.b64encode(b"v" * 100).decode()
rnd = random.Random(1)
with open(path, "w") as f:
    for _ in range(50000):
        t = {"method": op.upper(), "url": "http://%s/v0/entity?id=key%d" % (addr, rnd.randrange(keys))}
        if op == "put":
            t["body"] = body
        f.write(json.dumps(t) + "\n")
EOF2
	done
	run_vegeta() { # out op rate duration
		onload "$vegeta" attack -format=json -targets="$tmp/targets.$2" -rate="$3/1s" -duration="$4" \
			-connections=64 -workers=64 -max-workers=64 | onload "$vegeta" report -type=json >"$1"
	}
	vegeta_result() {
		python3 - "$1" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
l = r["latencies"]
print("RESULT rps=%.0f requests=%d p50_us=%.0f p90_us=%.0f p99_us=%.0f p999_us=na max_us=%.0f mean_us=%.0f success=%.4f" % (
    r["rate"], r["requests"], l["50th"] / 1e3, l["90th"] / 1e3, l["99th"] / 1e3, l["max"] / 1e3, l["mean"] / 1e3, r["success"]))
EOF2
	}
	for r in $(seq 1 "$rounds"); do
		order=(vegeta kvctl)
		((r % 2)) || order=(kvctl vegeta)
		for op in put get; do
			rate=rate_$op
			for tool in "${order[@]}"; do
				echo "# round $r open $op $tool at ${!rate}/s, every server idle first at $(idle_wait "${IDLE:-0.3}" 36 "${pids[@]}") cores: $(uptime)" >&2
				f="$tmp/open.$tool.$op.$r"
				if [[ $tool == vegeta ]]; then
					run_vegeta "$f.warm" "$op" "${!rate}" 2s
					run_vegeta "$f" "$op" "${!rate}" "$duration"
					line=$(vegeta_result "$f")
				else
					onload "$kvctl" --addr "$three_grpc" bench --target http --http "$three_http" --rate "${!rate}" -c 64 \
						--workload "$op" --keys "$keys" --key-prefix key --duration "$duration" --warmup 2s --quiet --json \
						--max-errors 100 --hist "$f.hist" >"$f" || true
					line=$(kvctl_result "$f")
				fi
				echo "$line" >>"$tmp/open.$tool.$op"
				echo "round $r open $op $tool rate=${!rate} $line"
			done
		done
	done

	# The 3-node cluster at 1000 PUT/s (open model, kvctl bench): the batches and syscalls of a
	# light load, beside those at the closed-loop max.
	for r in $(seq 1 "$rounds"); do
		f="$tmp/open.kvctl.put1k.$r"
		s0=$(nodesnap three)
		onload "$kvctl" --addr "$three_grpc" bench --target http --http "$three_http" --rate 1000 -c 64 \
			--workload put --keys "$keys" --key-prefix key --duration "$duration" --warmup 0s --quiet --json \
			--max-errors 100 --hist "$f.hist" >"$f" || true
		s1=$(nodesnap three)
		line="$(kvctl_result "$f")$(nodediff "$s0" "$s1" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"])' "$f")")"
		echo "$line" >>"$tmp/open.kvctl.put1k"
		echo "round $r open put kvctl rate=1000 $line"
	done

	# per_round A B FIELD: median over rounds of A's FIELD / B's FIELD, each pair from one round.
	per_round() {
		local r
		for r in $(seq 1 "$rounds"); do
			awk -v a="$(field "$3" "$tmp/closed.$1.$r")" -v b="$(field "$3" "$tmp/closed.$2.$r")" 'BEGIN {print a / b}'
		done | median
	}
	med() { field "$2" "$tmp/$1" | median; }
	ms() { awk -v u="$1" 'BEGIN {printf "%.1f ms", u / 1000}'; }
	echo
	echo "## write-path comparison: $rounds round(s) of $duration, wrk -t$threads; $(uptime | sed 's/.*load/load/')"
	echo
	echo "| figure | measured | target |"
	echo "| --- | --- | --- |"
	echo "| 3 nodes RF=3 PUT, closed loop -c16 / -c64 | $(med closed.three.put.c16 rps) / $(med closed.three.put.c64 rps) req/s, p99 $(ms "$(med closed.three.put.c16 p99_us)") / $(ms "$(med closed.three.put.c64 p99_us)") | ≥ 10k/s at -c64 |"
	echo "| same, GET -c16 / -c64 | $(med closed.three.get.c16 rps) / $(med closed.three.get.c64 rps) req/s, p99 $(ms "$(med closed.three.get.c16 p99_us)") / $(ms "$(med closed.three.get.c64 p99_us)") | ≥ 15k/s |"
	echo "| 1 node PUT / GET -c64 (reference) | $(med closed.one.put.c64 rps) / $(med closed.one.get.c64 rps) req/s | |"
	echo "| 3-node PUT / 1-node PUT (-c64, per-round ratio) | $(per_round three.put.c64 one.put.c64 rps | awk '{printf "%.2f", $1}') | ≥ 0.5 |"
	echo "| open model PUT p99 at 60% of closed max ($rate_put/s): vegeta / kvctl bench | $(ms "$(med open.vegeta.put p99_us)") / $(ms "$(med open.kvctl.put p99_us)") | ≤ 10 ms |"
	echo "| open model GET p99 at 60% of closed max ($rate_get/s): vegeta / kvctl bench | $(ms "$(med open.vegeta.get p99_us)") / $(ms "$(med open.kvctl.get p99_us)") | ≤ 10 ms |"
	echo "| --sync-writes 3 nodes PUT / etcd 3 members PUT, -c16 | $(per_round sync.put.c16 etcd.put.c16 rps | awk '{printf "%.2f", $1}')× ($(med closed.sync.put.c16 rps) vs $(med closed.etcd.put.c16 rps) req/s) | ≥ 2× |"
	echo "| same, -c64 | $(per_round sync.put.c64 etcd.put.c64 rps | awk '{printf "%.2f", $1}')× ($(med closed.sync.put.c64 rps) vs $(med closed.etcd.put.c64 rps) req/s) | ≥ 2× |"
	if [[ -n ${BASELINE:-} ]]; then
		echo "| --sync-writes 3 nodes PUT, this tree / $BASELINE, -c16 / -c64 | $(per_round sync.put.c16 base.put.c16 rps | awk '{printf "%.2f", $1}')× / $(per_round sync.put.c64 base.put.c64 rps | awk '{printf "%.2f", $1}')× ($(med closed.base.put.c16 rps) / $(med closed.base.put.c64 rps) req/s before) | |"
	fi
	echo "| servers' threads waiting for a CPU (run queue), per request, -c64 PUT: 3 nodes / 1 node / etcd | $(med closed.three.put.c64 server_runq_us_per_req) / $(med closed.one.put.c64 server_runq_us_per_req) / $(med closed.etcd.put.c64 server_runq_us_per_req) µs | |"
	echo "| node CPU per replicated PUT, 3 nodes summed (-c64) | $(med closed.three.put.c64 server_cpu_us_per_req) core-µs (1 node: $(med closed.one.put.c64 server_cpu_us_per_req); etcd: $(med closed.etcd.put.c64 server_cpu_us_per_req)) | ≤ 120 core-µs |"
	for op in put get; do
		for q in p50_us p99_us; do
			v=$(med "open.vegeta.$op" $q) k=$(med "open.kvctl.$op" $q)
			echo "| kvctl bench vs vegeta, open $op ${q%_us} | $(ms "$k") vs $(ms "$v") ($(awk -v k="$k" -v v="$v" 'BEGIN {printf "%+.0f%%", (k / v - 1) * 100}')) | within 20% |"
		done
		# vegeta (64 workers, -max-workers 64) sends a request only when a worker is free and
		# times it from then: behind its schedule it offers less than asked and does not count
		# the wait. kvctl keeps every request's schedule (lag) and times from it (p50/p99 above);
		# from the actual send (uncorrected) it measures what vegeta does.
		rate=rate_$op
		echo "| open $op rate achieved, asked ${!rate}/s: vegeta / kvctl bench | $(med "open.vegeta.$op" rps) / $(med "open.kvctl.$op" rps) | = asked |"
		echo "| open $op kvctl bench from the actual send (uncorrected) p50 / p99; its send lag p99 | $(ms "$(med "open.kvctl.$op" uncorr_p50_us)") / $(ms "$(med "open.kvctl.$op" uncorr_p99_us)"); $(ms "$(med "open.kvctl.$op" lag_p99_us)") | |"
	done
	echo
	for c in "${setups[@]}"; do
		for f in "$tmp"/closed.$c.*.c16 "$tmp"/closed.$c.*.c64; do
			[[ -f $f ]] && summary "$(basename "$f" | sed 's/^closed\.//')" "$f"
		done
	done
	for f in "$tmp"/open.*.put "$tmp"/open.*.get; do summary "$(basename "$f")" "$f"; done
	echo
	echo "## per node, medians over rounds: CPU µs, write syscalls and goroutines created per request; items per batch message (n1 coordinates)"
	for f in "$tmp"/closed.three.*.c16 "$tmp"/closed.three.*.c64 "$tmp"/closed.one.*.c64 "$tmp"/closed.sync.put.c64 "$tmp"/open.kvctl.put1k; do
		[[ -f $f ]] || continue
		printf '%-16s' "$(basename "$f" | sed 's/^closed\.//; s/^open\.kvctl\./three.open./')"
		for k in rps n1_cpu_us n2_cpu_us n3_cpu_us n1_syscw n2_syscw n3_syscw n1_gor n2_gor n3_gor items_per_batch batches_per_req; do
			v=$(grep '^RESULT' "$f" | grep -o " $k=[^ ]*" | sed 's/.*=//' | grep -v na | median 2>/dev/null || true)
			[[ -n $v ]] && printf ' %s=%s' "$k" "$v"
		done
		echo
	done
	for f in "$tmp"/closed.*.c16 "$tmp"/closed.*.c64; do
		e=$(grep '^RESULT' "$f" | sed -E 's/.* non2xx=([0-9]+) connect=([0-9]+) read=([0-9]+) write=([0-9]+) timeout=([0-9]+).*/\1 \2 \3 \4 \5/' | awk '{s += $1 + $2 + $3 + $4 + $5} END {print s + 0}')
		((e == 0)) || echo "errors in $(basename "$f"): $e (non-2xx + socket errors, all rounds)"
	done
	if [[ -n ${PROFILE:-} ]]; then echo; echo "## kvctl pprof cpu --all --top 20 (round 1, 3-node PUT -c64)"; cat "$tmp/pprof.txt"; fi
	if [[ ${GCTRACE:-0} == 1 ]]; then
		echo
		echo "## GODEBUG=gctrace=1: GCs per node over the whole run, and each node's last gc line"
		for l in "$tmp"/*.n*.log; do echo "$(basename "$l"): $(grep -c '^gc ' "$l") GCs; $(grep '^gc ' "$l" | tail -1)"; done
	fi
	;;
ratio | hotkeys)
	a=one b=three label="3n/1n"
	[[ $mode == hotkeys ]] && a=off b=on label="on/off"
	if [[ $script != put ]]; then fill "${a}_grpc"; fill "${b}_grpc"; fi
	for r in $(seq 1 "$rounds"); do
		order=("$a" "$b")
		((r % 2)) || order=("$b" "$a")
		for c in "${order[@]}"; do
			addr=${c}_http
			echo "# round $r $c: $(uptime)" >&2
			run_wrk "$tmp/warm" "$script" 2s "${!addr}"
			pidsv=${c}_pids
			t0=$(cpu_ticks ${!pidsv})
			run_wrk "$tmp/wrk.$c.$r" "$script" "$duration" "${!addr}"
			t1=$(cpu_ticks ${!pidsv})
			line=$(grep '^RESULT' "$tmp/wrk.$c.$r")
			# the cluster's CPU time (user + system, all its nodes) per request: far steadier
			# than the rate on a shared machine
			cpu=$(awk -v d="$((t1 - t0))" -v tck="$(getconf CLK_TCK)" -v n="$(field requests "$tmp/wrk.$c.$r")" 'BEGIN {printf "%.0f", d * 1e6 / tck / n}')
			line="$line cpu_us_per_req=$cpu"
			echo "$line" >"$tmp/wrk.$c.$r"
			echo "$line" >>"$tmp/wrk.$c.all"
			echo "round $r $c $line"
		done
		a_rps=$(field rps "$tmp/wrk.$a.$r") b_rps=$(field rps "$tmp/wrk.$b.$r")
		a_cpu=$(field cpu_us_per_req "$tmp/wrk.$a.$r") b_cpu=$(field cpu_us_per_req "$tmp/wrk.$b.$r")
		echo "round $r ratio rps $label = $(awk -v a="$b_rps" -v b="$a_rps" 'BEGIN {printf "%.3f", a / b}')" | tee -a "$tmp/ratio"
		echo "round $r ratio cpu_us_per_req $label = $(awk -v a="$b_cpu" -v b="$a_cpu" 'BEGIN {printf "%.3f", a / b}')" | tee -a "$tmp/ratio.cpu"
		if [[ $r == 1 ]]; then
			for c in "$a" "$b"; do echo "--- wrk output, round 1, $c:"; cat "$tmp/wrk.$c.1"; done
		fi
	done
	summary "$a" "$tmp/wrk.$a.all"
	summary "$b" "$tmp/wrk.$b.all"
	echo "median ratio rps $label = $(sed 's/.*= //' "$tmp/ratio" | median)"
	echo "median ratio cpu_us_per_req $label = $(sed 's/.*= //' "$tmp/ratio.cpu" | median)"
	for c in "$a" "$b"; do echo "$c median cpu_us_per_req = $(field cpu_us_per_req "$tmp/wrk.$c.all" | median)"; done
	;;
shell)
	echo "grpc $grpc  http $http  (Ctrl-C stops)"
	sleep infinity &
	pids+=($!)
	wait $!
	;;
wrk)
	[[ $script == put ]] || fill
	for r in $(seq 1 "$rounds"); do
		run_wrk "$tmp/warm" "$script" 2s
		echo "# round $r: $(uptime)" >&2
		run_wrk "$tmp/wrk.$r" "$script" "$duration"
		cat "$tmp/wrk.$r"
		grep '^RESULT' "$tmp/wrk.$r" >>"$tmp/wrk.all"
	done
	summary "wrk-$script-${nodes}n" "$tmp/wrk.all"
	;;
agree)
	fill
	for r in $(seq 1 "$rounds"); do
		# Alternate which tool goes first.
		order=(wrk kvctl)
		((r % 2)) || order=(kvctl wrk)
		for tool in "${order[@]}"; do
			echo "# round $r $tool: $(uptime)" >&2
			if [[ $tool == wrk ]]; then
				run_wrk "$tmp/warm" get 2s
				run_wrk "$tmp/wrk.$r" get "$duration"
				line="$(grep '^RESULT' "$tmp/wrk.$r") $(hist_figures wrk "$tmp/wrk.$r.hist")"
				echo "$line" >>"$tmp/wrk.all"
			else
				run_kvctl_get "$tmp/kvctl.$r.json"
				line=$(kvctl_result "$tmp/kvctl.$r.json")
				echo "$line" >>"$tmp/kvctl.all"
			fi
			echo "round $r $tool $line"
		done
	done
	summary wrk "$tmp/wrk.all"
	summary kvctl "$tmp/kvctl.all"
	# Side by side, medians over rounds: raw = neither corrected; wrkcorr = both with wrk's correction.
	for f in rps raw_p50_us raw_p99_us wrkcorr_p50_us wrkcorr_p99_us; do
		w=$(field $f "$tmp/wrk.all" | median) k=$(field $f "$tmp/kvctl.all" | median)
		awk -v f=$f -v w="$w" -v k="$k" 'BEGIN {printf "%-15s wrk %8s  kvctl %8s  kvctl/wrk %+.1f%%\n", f, w, k, (k / w - 1) * 100}'
	done
	;;
cpu)
	# CPU each generator spends per request: perf stat task-clock of the whole process over a
	# closed-loop GET run (no warm-up for either, so every request it sent is in its count).
	fill
	for r in $(seq 1 "$rounds"); do
		for tool in wrk kvctl; do
			if [[ $tool == wrk ]]; then
				KEYS=$keys perf stat -x, -e task-clock,context-switches -o "$tmp/perf" -- taskset -c "$load_cpus" \
					wrk -t"$threads" -c"$conns" -d"$duration" -s "$root/bench/get.lua" "http://$http" >"$tmp/out"
				reqs=$(field requests "$tmp/out")
			else
				perf stat -x, -e task-clock,context-switches -o "$tmp/perf" -- taskset -c "$load_cpus" \
					"$kvctl" --addr "$grpc" bench --target http --http "$http" --rate 0 -c "$conns" --workload get \
					--keys "$keys" --key-prefix key --duration "$duration" --warmup 0s --quiet --json >"$tmp/out.json"
				reqs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"])' "$tmp/out.json")
			fi
			ms=$(grep task-clock "$tmp/perf" | cut -d, -f1)
			cs=$(grep context-switches "$tmp/perf" | cut -d, -f1)
			line=$(awk -v t="$tool" -v ms="$ms" -v cs="$cs" -v n="$reqs" -v d="$duration" \
				'BEGIN {printf "RESULT tool=%s requests=%d cpu_ms=%.0f cpu_us_per_req=%.2f cs_per_req=%.3f rps=%.0f", t, n, ms, ms * 1000 / n, cs / n, n / (d + 0)}')
			echo "round $r $line ($(uptime | sed 's/.*load/load/'))"
			echo "$line" >>"$tmp/cpu.$tool"
		done
	done
	for tool in wrk kvctl; do
		echo "$tool median: CPU µs/request $(field cpu_us_per_req "$tmp/cpu.$tool" | median), context switches/request $(field cs_per_req "$tmp/cpu.$tool" | median), rps $(field rps "$tmp/cpu.$tool" | median)"
	done
	;;
kvctl)
	fill
	echo "# kvctl --addr $grpc bench $*: $(uptime)" >&2
	onload "$kvctl" --addr "$grpc" bench --key-prefix key --keys "$keys" "$@"
	;;
esac
