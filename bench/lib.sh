# bench/lib.sh: helpers that bench/run.sh and bench/scale.sh share (sourced, not run).

# cpu_ticks PID...: user + system CPU ticks of the processes so far
cpu_ticks() { local p sum=0; for p in "$@"; do sum=$((sum + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$sum"; }

# median of the numbers on stdin
median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# field NAME of the RESULT lines in FILE
field() { grep '^RESULT' "$2" | sed -E "s/.* $1=([^ ]+).*/\1/"; }

# idle_wait LIMIT LOOKS PID...: until the processes use less than LIMIT cores over 5 s, at most
# LOOKS looks; prints the last look's cores. The flushes and compactions a load leaves behind
# would otherwise run in the next round's time.
idle_wait() {
	local limit=$1 looks=$2 i c0 c hz
	shift 2
	hz=$(getconf CLK_TCK)
	for i in $(seq 1 "$looks"); do
		c0=$(cpu_ticks "$@")
		sleep 5
		c=$(awk -v c=$(($(cpu_ticks "$@") - c0)) -v hz="$hz" 'BEGIN {printf "%.2f", c / hz / 5}')
		awk -v c="$c" -v m="$limit" 'BEGIN {exit !(c < m)}' && { echo "$c"; return; }
	done
	echo "$c (not idle after $((looks * 5)) s)"
}
