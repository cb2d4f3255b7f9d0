#!/bin/bash
# Measures what scripts/simval compares hcomm sim with over TCP: one rank per
# network namespace (simv0..simv{N-1}, 192.168.93.(10+i)/24, joined by a
# bridge in namespace simvbr; nothing outside them is touched), every rank's
# egress shaped with tc tbf to RATE so that bandwidth is set by the shaper,
# not by the CPU (robust to load). AllReduce with ring, rd, hd and dbtree
# forced in turn, and AllGather, on 2, 4 and 8 ranks, three runs each, into
# $1 (default simval-tcp). Needs root (ip netns, tc).
#
# CAL=1 adds the calibration runs of the terms for more ranks than CPUs
# (every namespace's ranks share the machine's CPUs, and a TCP send does
# its network work on the sender's CPU), never validated: the same
# AllReduces on 2, 3 and 4 ranks confined to one CPU (taskset -c 0) and on
# 3 and 6 ranks on two (taskset -c 0,1), ar_nN_cC_rR.csv. The validated
# combinations (4 and 8 ranks on the machine's 2 CPUs) are never among them.
#
# Usage: scripts/simval/measure_tcp.sh [dir] [rate]   (rate default 400mbit)
#        then: go run ./scripts/simval -tcp dir
# MAXB (default 4M) is the largest size, RANKS (default "2 4 8") the rank
# counts, REPS (default 3) the runs of each, RUNS (default "1 … REPS") the
# numbers of the runs to make (scripts/simval/idle.sh makes one at a time,
# between the shared-memory runs). Every run file is bracketed by a probe
# of the machine's speed (probe.sh; DIR/probes.csv; PROBE=0: none).
# HCOMM_BIN: use that hcomm binary instead of building one. TARGET is
# perf's -T (default 300ms). Small messages are CPU time:
# run it on an idle machine. BOOST=1 runs it in a new session whose
# autogroup has nice -20 (label such figures "under load").
set -euo pipefail
if [ "${BOOST:-0}" = 1 ] && [ -z "${SIMVAL_BOOSTED:-}" ]; then
	export SIMVAL_BOOSTED=1
	exec setsid bash -c 'echo -20 >/proc/self/autogroup && exec "$@"' _ "$0" "$@"
fi
out=${1:-simval-tcp}
rate=${2:-400mbit}
maxb=${MAXB:-4M}
ranks=${RANKS:-2 4 8}
reps=${REPS:-3}
runs=${RUNS:-$(seq 1 "$reps")}
mkdir -p "$out"
if [ -n "${HCOMM_BIN:-}" ]; then
	cp "$HCOMM_BIN" "$out/hcomm"
else
	go build -o "$out/hcomm" ./cmd/hcomm
fi
bin=$(cd "$out" && pwd)/hcomm
. "$(dirname "$0")/probe.sh"
probe_init "$out" "$bin"
pfx=simv
down() {
	for ns in $(ip netns list | awk '{print $1}' | grep -E "^${pfx}([0-9]+|br)$" || true); do
		ip netns del "$ns"
	done
}
up() {
	local n=$1
	down
	ip netns add ${pfx}br
	ip -n ${pfx}br link set lo up
	ip -n ${pfx}br link add br0 type bridge
	ip -n ${pfx}br link set br0 up
	for ((i = 0; i < n; i++)); do
		ip netns add $pfx$i
		ip netns exec $pfx$i sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || true
		ip -n $pfx$i link set lo up
		ip -n $pfx$i link add eth0 type veth peer name p$i netns ${pfx}br
		ip -n $pfx$i addr add 192.168.93.$((10 + i))/24 dev eth0
		ip -n $pfx$i link set eth0 up
		ip -n ${pfx}br link set p$i master br0
		ip -n ${pfx}br link set p$i up
		# A small bucket (256 KiB: a GSO packet must fit) so that even short messages are shaped.
		ip netns exec $pfx$i tc qdisc replace dev eth0 root tbf rate "$rate" burst 256kb latency 50ms
	done
	sleep 1
}
trap down EXIT
rsh=$(mktemp /tmp/simv-rsh.XXXXXX)
cat >"$rsh" <<'RSH'
#!/bin/sh
host=$1
shift
case "$host" in
simv[0-9]*) ;;
*) echo "rsh: refusing unknown host $host" >&2; exit 1 ;;
esac
exec ip netns exec "$host" sh -c "$*"
RSH
chmod +x "$rsh"
echo "rate $rate" >"$out/rate"
# job N NAME [prefix...]: the AllReduces (and, without a prefix, the
# AllGather) of N ranks, one per namespace, REPS runs, into NAME_rR.csv.
job() {
	local n=$1 name=$2
	shift 2
	up "$n"
	local hosts
	hosts=$(for ((i = 0; i < n; i++)); do printf '%s%d:1,' $pfx "$i"; done)
	for rep in $runs; do
		probe_start
		for a in ring rd hd dbtree; do
			"$@" ip netns exec ${pfx}0 "$bin" run --hosts "${hosts%,}" --rsh "$rsh" --store-addr 192.168.93.10:0 -- \
				"$bin" perf -op allreduce -b 8 -e "$maxb" -f 16 -T "${TARGET:-300ms}" -csv -algo allreduce=$a
		done >"$out/ar_${name}_r${rep}.csv"
		probe_end "$out/ar_${name}_r${rep}.csv"
		if [ $# -eq 0 ]; then
			probe_start
			ip netns exec ${pfx}0 "$bin" run --hosts "${hosts%,}" --rsh "$rsh" --store-addr 192.168.93.10:0 -- \
				"$bin" perf -op allgather -b 8 -e "$maxb" -f 16 -T "${TARGET:-300ms}" -csv >"$out/ag_${name}_r${rep}.csv"
			probe_end "$out/ag_${name}_r${rep}.csv"
		fi
	done
}
for n in $ranks; do
	job "$n" "n$n"
done
if [ "${CAL:-0}" = 1 ]; then
	for n in 2 3 4; do
		job "$n" "n${n}_c1" taskset -c 0
	done
	for n in 3 6; do
		job "$n" "n${n}_c2" taskset -c 0,1
	done
fi
rm -f "$rsh"
