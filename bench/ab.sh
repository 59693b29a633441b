#!/usr/bin/env bash
# bench/ab.sh: two builds of kvnode side by side in one run, to tell a code change from the
# machine's noise. Starts a 3-node RF=3 and a 1-node cluster of each build (A and B: directories
# holding kvnode and kvctl, e.g. built from `git archive REV`), then per round a wrk closed-loop
# PUT -c64 (or GET, -s get: the keys are filled first) on each of the four, the order rotated
# every round; per node: CPU µs, goroutines created and write syscalls per request (/proc and
# /metrics around the measured part). Then the open model on each 3-node cluster at 60% of B's
# 3-node median: vegeta and B's kvctl bench --rate, in turn, with kvctl's uncorrected latency
# and send lag beside its corrected figures, and kvctl again with 256 connections (kvctl256: a
# request waits for its own connection, vegeta's for any).
#
#   bench/ab.sh [-d 5s] [-r 3] [-k 100000] [-s put|get] A_DIR B_DIR
#
# Env: PROFILE=DIR: kvctl pprof cpu --all of both 3-node clusters in every round (PROFILE_SECONDS,
# default 4), written to DIR/{a,b}.r<round>/; BASE_PORT (default 27000); VEGETA=path; OPEN=0
# (or -s get) skips the open model. Nothing is pinned. Run it on an otherwise idle machine.
set -euo pipefail

duration=5s rounds=3 keys=100000 script=put
while getopts "d:r:k:s:" opt; do
	case $opt in
	s) script=$OPTARG ;;
	d) duration=$OPTARG ;;
	r) rounds=$OPTARG ;;
	k) keys=$OPTARG ;;
	*) sed -n '2,/^[^#]/{/^#/p}' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[[ $script == put || $script == get ]] || { echo "ab.sh: -s must be put or get" >&2; exit 2; }
(($# == 2)) || { sed -n '2,/^[^#]/{/^#/p}' "$0" >&2; exit 2; }
A=$(cd "$1" && pwd) B=$(cd "$2" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
base=${BASE_PORT:-27000}
vegeta=${VEGETA:-$(command -v vegeta || echo "$(go env GOPATH)/bin/vegeta")}
tmp=$(mktemp -d /tmp/ringkv-ab.XXXXXX)
pids=()
hz=$(getconf CLK_TCK)

teardown() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# start_cluster NAME NODES BASE BINDIR
start_cluster() {
	local name=$1 n=$2 b=$3 bin=$4 peers="" admins="" i
	for i in $(seq 1 "$n"); do peers+="${peers:+,}n$i=127.0.0.1:$((b + 10 + i))"; done
	local -a ps=()
	for i in $(seq 1 "$n"); do
		"$bin/kvnode" --id "n$i" --data "$tmp/$name/n$i" --replicas 3 --peers "$peers" \
			--grpc "127.0.0.1:$((b + 10 + i))" --http "127.0.0.1:$((b + 20 + i))" \
			--admin "127.0.0.1:$((b + 30 + i))" >"$tmp/$name.n$i.log" 2>&1 &
		pids+=($!) ps+=($!)
		admins+="${admins:+ }127.0.0.1:$((b + 30 + i))"
	done
	printf -v "${name}_pids" '%s' "${ps[*]}"
	printf -v "${name}_admins" '%s' "$admins"
	printf -v "${name}_grpc" '%s' "127.0.0.1:$((b + 11))"
	printf -v "${name}_http" '%s' "127.0.0.1:$((b + 21))"
	local deadline=$((SECONDS + 30))
	until curl -fs -o /dev/null -X PUT --data x "http://127.0.0.1:$((b + 21))/v0/entity?id=settle&ack=$n&from=$n"; do
		((SECONDS < deadline)) || { echo "ab.sh: $name not ready; logs:" >&2; tail -n 20 "$tmp/$name".n*.log >&2; exit 1; }
		sleep 0.2
	done
	echo "# $name ($bin): $n node(s) up, http 127.0.0.1:$((b + 21))" >&2
}

# snap SETUP: per node "ticks syscw goroutines_created"
snap() {
	local pv=${1}_pids av=${1}_admins i=0 p
	local -a ps=(${!pv}) as=(${!av})
	for p in "${ps[@]}"; do
		curl -fs "http://${as[$i]}/metrics" | awk -v t="$(awk '{print $14 + $15}' "/proc/$p/stat")" \
			-v w="$(awk '/^syscw/ {print $2}' "/proc/$p/io")" \
			'/^go_sched_goroutines_created_goroutines_total / {g = $2} END {print t, w, g}'
		i=$((i + 1))
	done
}
# diffsnap BEFORE AFTER REQUESTS -> " n1_cpu_us=.. n1_syscw=.. n1_gor=.. ... cpu_us=<sum>"
diffsnap() {
	paste -d' ' <(echo "$1") <(echo "$2") | awk -v n="$3" -v hz="$hz" '
		{ i++; c = ($4 - $1) / hz * 1e6 / n; s += c
		  printf " n%d_cpu_us=%.1f n%d_syscw=%.2f n%d_gor=%.2f", i, c, i, ($5 - $2) / n, i, ($6 - $3) / n }
		END { printf " cpu_us=%.1f\n", s }'
}
field() { { grep -o " $1=[^ ]*" || true; } | sed "s/.*=//"; }
median() { sort -g | awk '{a[NR] = $1} END {if (NR == 0) exit; if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

echo "# start $(date -u +%H:%M:%S): $(uptime | sed "s/.*load/load/")" >&2
start_cluster a3 3 "$base" "$A"
start_cluster b3 3 "$((base + 100))" "$B"
start_cluster a1 1 "$((base + 200))" "$A"
start_cluster b1 1 "$((base + 300))" "$B"
setups=(a3 b3 a1 b1)
if [[ $script == get ]]; then
	for c in "${setups[@]}"; do
		g=${c}_grpc
		"$B/kvctl" --addr "${!g}" bench fill --keys "$keys" --key-prefix key >/dev/null 2>&1
	done
fi

for r in $(seq 1 "$rounds"); do
	k=$(((r - 1) % 4))
	order=("${setups[@]:$k}" "${setups[@]:0:$k}")
	for c in "${order[@]}"; do
		h=${c}_http g=${c}_grpc f="$tmp/closed.$c.$r" prof=""
		KEYS=$keys wrk -t1 -c64 -d2s -s "$root/bench/$script.lua" "http://${!h}" >/dev/null
		if [[ -n ${PROFILE:-} && $c == ?3 ]]; then
			mkdir -p "$PROFILE/${c:0:1}.r$r"
			"$B/kvctl" --addr "${!g}" pprof cpu --all --seconds "${PROFILE_SECONDS:-4}" -d "$PROFILE/${c:0:1}.r$r" >/dev/null 2>&1 &
			prof=$!
		fi
		s0=$(snap "$c")
		KEYS=$keys wrk -t1 -c64 -d"$duration" --latency -s "$root/bench/$script.lua" "http://${!h}" >"$f"
		s1=$(snap "$c")
		[[ -z $prof ]] || wait "$prof" || true
		line="$(grep '^RESULT' "$f")$(diffsnap "$s0" "$s1" "$(grep '^RESULT' "$f" | field requests)") load=$(cut -d' ' -f1 /proc/loadavg)"
		echo "$line" >>"$tmp/closed.$c"
		echo "round $r $c $script -c64 $line"
	done
done

echo
echo "## medians of $rounds rounds, ${script^^} -c64 closed loop; $(uptime | sed 's/.*load/load/')"
for c in "${setups[@]}"; do
	printf '%-3s' "$c"
	for k in rps p50_us p99_us cpu_us n1_cpu_us n2_cpu_us n3_cpu_us n1_gor n2_gor n1_syscw n2_syscw; do
		v=$(field "$k" <"$tmp/closed.$c" | median)
		[[ -z $v ]] || printf ' %s=%s' "$k" "$v"
	done
	echo
done
for n in 3 1; do
	echo "per-round B/A n=$n: rps $(paste -d' ' <(field rps <"$tmp/closed.a$n") <(field rps <"$tmp/closed.b$n") | awk '{printf "%.3f ", $2 / $1}')" \
		"cpu_us $(paste -d' ' <(field cpu_us <"$tmp/closed.a$n") <(field cpu_us <"$tmp/closed.b$n") | awk '{printf "%.3f ", $2 / $1}')"
done

[[ ${OPEN:-1} == 1 && $script == put ]] || exit 0 # the open model offers PUTs
rate=$(field rps <"$tmp/closed.b3" | median | awk '{printf "%.0f", $1 * 0.6}')
echo
echo "## open model PUT at $rate/s (60% of B's 3-node closed median), 64 connections, $duration + 2 s warm-up"
for c in a3 b3; do
	h=${c}_http
	python3 - "${!h}" "$keys" "$tmp/targets.$c" <<'EOF'
import base64, json, random, sys
addr, keys, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
body = base64.b64encode(b"v" * 100).decode()
rnd = random.Random(1)
with open(path, "w") as f:
    for _ in range(50000):
        f.write(json.dumps({"method": "PUT", "url": "http://%s/v0/entity?id=key%d" % (addr, rnd.randrange(keys)), "body": body}) + "\n")
EOF
done
for r in $(seq 1 "$rounds"); do
	tools=(vegeta kvctl kvctl256)
	k=$(((r - 1) % 3))
	order=("${tools[@]:$k}" "${tools[@]:0:$k}")
	for c in a3 b3; do
		h=${c}_http g=${c}_grpc
		for tool in "${order[@]}"; do
			f="$tmp/open.$tool.$c.$r"
			if [[ $tool == vegeta ]]; then
				"$vegeta" attack -format=json -targets="$tmp/targets.$c" -rate="$rate/1s" -duration=2s -connections=64 -workers=64 -max-workers=64 >/dev/null
				"$vegeta" attack -format=json -targets="$tmp/targets.$c" -rate="$rate/1s" -duration="$duration" -connections=64 -workers=64 \
					-max-workers=64 | "$vegeta" report -type=json >"$f"
				line=$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1])); l = r["latencies"]
print(" rps=%.0f p50_us=%.0f p90_us=%.0f p99_us=%.0f max_us=%.0f success=%.4f" % (r["rate"], l["50th"] / 1e3, l["90th"] / 1e3, l["99th"] / 1e3, l["max"] / 1e3, r["success"]))' "$f")
			else
				conns=64
				[[ $tool == kvctl256 ]] && conns=256
				"$B/kvctl" --addr "${!g}" bench --target http --http "${!h}" --rate "$rate" -c "$conns" --workload put --keys "$keys" \
					--key-prefix key --duration "$duration" --warmup 2s --quiet --json --max-errors 100 >"$f" || true
				line=$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
def p(l, q): return [x["ms"] for x in l["percentiles"] if x["p"] == q][0] * 1000
c, u, s = r["latency"], r["uncorrected"], r["send_lag"]
print(" rps=%.0f p50_us=%.0f p90_us=%.0f p99_us=%.0f max_us=%.0f uncorr_p50_us=%.0f uncorr_p99_us=%.0f uncorr_p999_us=%.0f lag_p50_us=%.0f lag_p99_us=%.0f lag_max_us=%.0f gen_cores=%.2f invalid=%s" % (
    r["rate_achieved"], p(c, 50), p(c, 90), p(c, 99), c["max_ms"] * 1000, p(u, 50), p(u, 99), p(u, 99.9), p(s, 50), p(s, 99), s["max_ms"] * 1000,
    r["generator_cpu"]["cores"], r["invalid"]))' "$f")
			fi
			line+=" load=$(cut -d' ' -f1 /proc/loadavg)"
			echo "$line" >>"$tmp/open.$tool.$c"
			echo "round $r open $c $tool $line"
		done
	done
done
echo
echo "## open model medians; $(uptime | sed 's/.*load/load/')"
for c in a3 b3; do
	for tool in vegeta kvctl kvctl256; do
		printf '%-3s %-8s' "$c" "$tool"
		for k in rps p50_us p99_us uncorr_p50_us uncorr_p99_us uncorr_p999_us lag_p99_us lag_max_us gen_cores; do
			v=$(field "$k" <"$tmp/open.$tool.$c" | median)
			[[ -z $v ]] || printf ' %s=%s' "$k" "$v"
		done
		echo
	done
done
