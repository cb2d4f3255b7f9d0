#!/bin/sh
# topology-idle.sh — issue 12's latency-bound rows, for an idle machine
# (the shaped-link bandwidth rows are topology-ab.sh's). Run as root from
# the repository root:
#
#   scripts/bench/topology-idle.sh [ROUNDS] > idle.csv
#   python3 scripts/bench/topology-summary.py idle.csv
#   python3 scripts/bench/topology-summary.py --rtt idle.csv   # per-job ratios to the round trip
#
# Every setting is run once per round, alternated, so the medians compare
# settings measured side by side. Rows (the "impl" column says which):
#   rtt ...      small messages across hosts: 8 B AllReduce and Barrier on
#                2 namespaces × 2 ranks, default vs HCOMM_TOPOLOGY=off, and
#                the references on 2 ranks, one per namespace: the round
#                trip (op pingpong: 8 B there and back, hcomm's own
#                Send/Recv; the issue's target is AllReduce and Barrier at
#                2 × 2 within 1.2× of it) and the exchange (a 2-rank
#                AllReduce or Barrier is one message each way at once, so
#                its time is one one-way trip plus the library's cost:
#                about half the round trip); the leader and rail forms
#                forced (rail: every rank exchanges with its peer on the
#                other host at once, then inside its host; the planner
#                picks leader when the namespaces' ranks outnumber the
#                machine's CPUs); and the pingpong row of "rtt 2x2 rail",
#                two round trips at once (0-2, 1-3) with 4 ranks on the
#                CPUs: the round trip under the crowding the 2 × 2 rows
#                run in;
#   rtt 2x2 default  hcomm run's default, --bind-to auto: the two
#                namespaces share this kernel, so each rank binds itself at
#                Init to its share of the CPUs and the hosts' leaders run
#                on different CPUs (every job the fast mode); "rtt 2x2
#                unbound" and "rtt 1x1 unbound" are --bind-to none (the
#                kernel places the ranks: either mode, by placement);
#   rtt 2x2 bound  --bind-to core (the hosts' first ranks,
#                the leaders, on different CPUs: see "leaders" below);
#   leaders apart|together  the default with each rank pinned by taskset
#                (0,3 | 1,2 or 0,2 | 1,3 on the two CPUs): on one 2-CPU
#                kernel two hosts' leaders on one CPU do their network-stack
#                work by turns, the slow mode unbound jobs fall into when
#                the kernel places them so. Seeing the masks bound, hcomm
#                takes host tpi1's leader on the CPU host tpi0's leader
#                does not use (rank 3 instead of 2 under "together"), so
#                both rows should be the fast mode ("together" was the
#                33–35 µs mode before that); every 2 × 2 row also times a
#                ping-pong (pairs 0-2 and 1-3 at once) in the same job;
#   pick ...     the planner against every forced AllReduce algorithm,
#                8 B to 64 MiB on 2 × 2, consecutive (slot) and interleaved
#                (node); the default should be within 10% of the best;
#   bind ...     affinity cost on this machine: 2 ranks over shared memory,
#                8 B and 32 MiB AllReduce, --bind-to none vs core vs numa.
# The namespaces' links are shaped to RATE (default 10gbit: latency rows
# want the link fast; pass 1gbit to compare with topology-ab.sh).
set -eu
ROUNDS=${1:-5}
RATE=${RATE:-10gbit}
WORK=${WORK:-/tmp/hcomm-topoidle}
SHARED=${SHARED:-../shared/bench}
mkdir -p "$WORK"
go build -o "$WORK/hcomm" ./cmd/hcomm
sed -e 's/^PFX=cbench/PFX=tpi/' -e 's/^SUBNET_PREFIX=192.168.77/SUBNET_PREFIX=192.168.81/' "$SHARED/netns.sh" >"$WORK/netns.sh"
chmod +x "$WORK/netns.sh"
printf '#!/bin/sh\nhost=$1; shift\nexec ip netns exec "$host" sh -c "$*"\n' >"$WORK/nsrsh"
chmod +x "$WORK/nsrsh"
"$WORK/netns.sh" up 2 "$RATE" >/dev/null
trap '"$WORK/netns.sh" down' EXIT

# ns HOSTS MAP LABEL OP B E F [VAR=VALUE...]: one sweep across namespaces.
ns() {
	hosts=$1 map=$2 label=$3 op=$4 b=$5 e=$6 f=$7
	shift 7
	xs=""
	for kv in "$@"; do xs="$xs -x $kv"; done
	ip netns exec tpi0 "$WORK/hcomm" run --hosts "$hosts" --map-by "$map" --rsh "$WORK/nsrsh" \
		--store-addr 192.168.81.10:0 --timeout 5m --bind-to "$BIND" $xs -- \
		$PIN "$WORK/hcomm" perf -op "$op" -b "$b" -e "$e" -f "$f" -T 1s -csv -H -label "$label"
}
PIN="" BIND=auto
# pin MODE: a wrapper that pins rank HCOMM_RANK of 2 × 2 (slot) by taskset.
cat >"$WORK/pin" <<'PIN'
#!/bin/sh
mode=$1; shift
r=$HCOMM_RANK
case $mode in
apart) c=$(( (r + r / 2) % 2 )) ;;
together) c=$(( r % 2 )) ;;
esac
exec taskset -c "$c" "$@"
PIN
chmod +x "$WORK/pin"

# local BIND SIZE: 2 ranks on this machine, bound by --bind-to BIND.
local_() {
	"$WORK/hcomm" run -n 2 --bind-to "$1" -- \
		"$WORK/hcomm" perf -op allreduce -b "$2" -e "$2" -T 1s -csv -H -label "bind $1"
}

for _ in $(seq "$ROUNDS"); do
	ns tpi0:2,tpi1:2 slot "rtt 2x2 default" allreduce,barrier,pingpong 8 8 2
	BIND=none
	ns tpi0:2,tpi1:2 slot "rtt 2x2 unbound" allreduce,barrier,pingpong 8 8 2
	BIND=core
	ns tpi0:2,tpi1:2 slot "rtt 2x2 bound" allreduce,barrier,pingpong 8 8 2
	BIND=none
	for mode in apart together; do
		PIN="$WORK/pin $mode"
		ns tpi0:2,tpi1:2 slot "rtt 2x2 leaders $mode" allreduce,barrier,pingpong 8 8 2
	done
	PIN="" BIND=auto
	ns tpi0:2,tpi1:2 slot "rtt 2x2 leader" allreduce,barrier 8 8 2 HCOMM_ALGO=allreduce=leader,barrier=hier
	ns tpi0:2,tpi1:2 slot "rtt 2x2 rail" allreduce,barrier,pingpong 8 8 2 HCOMM_ALGO=rail
	ns tpi0:2,tpi1:2 slot "rtt 2x2 off" allreduce,barrier 8 8 2 HCOMM_TOPOLOGY=off
	ns tpi0:1,tpi1:1 slot "rtt 1x1 exchange" allreduce,barrier,pingpong 8 8 2
	BIND=none
	ns tpi0:1,tpi1:1 slot "rtt 1x1 unbound" allreduce,barrier,pingpong 8 8 2
	BIND=auto
	for map in slot node; do
		ns tpi0:2,tpi1:2 "$map" "pick $map default" allreduce 8 64M 8
		for a in ring rd hd dbtree hring hier leader rail; do
			ns tpi0:2,tpi1:2 "$map" "pick $map $a" allreduce 8 64M 8 HCOMM_ALGO=allreduce=$a
		done
	done
	for size in 8 32M; do
		for bind in none core numa; do
			local_ "$bind" "$size"
		done
	done
done
