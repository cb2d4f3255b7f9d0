#!/bin/sh
# topology-ab.sh — the shaped-link topology figures of BENCHMARKS.md
# ("Topology across shaped links"): 2 network namespaces × 2 ranks, egress
# shaped with tc tbf, hcomm's settings (and Open MPI, if built) alternated
# in each of ROUNDS rounds. Run as root from the repository root:
#
#   scripts/bench/topology-ab.sh [RATE] [ROUNDS] > rows.csv
#
# It builds hcomm into $WORK, brings up namespaces tpb0, tpb1 (bridge
# tpbbr, subnet 192.168.79.0/24 — apart from ../shared/bench's cbench*),
# prints CSV rows labelled by setting, and takes the namespaces down.
# Summarise with: python3 scripts/bench/topology-summary.py rows.csv
set -eu
RATE=${1:-1gbit}
ROUNDS=${2:-3}
WORK=${WORK:-/tmp/hcomm-topobench}
SHARED=${SHARED:-../shared/bench}
mkdir -p "$WORK"
go build -o "$WORK/hcomm" ./cmd/hcomm
sed -e 's/^PFX=cbench/PFX=tpb/' -e 's/^SUBNET_PREFIX=192.168.77/SUBNET_PREFIX=192.168.79/' "$SHARED/netns.sh" >"$WORK/netns.sh"
chmod +x "$WORK/netns.sh"
printf '#!/bin/sh\nhost=$1; shift\nexec ip netns exec "$host" sh -c "$*"\n' >"$WORK/nsrsh"
cat >"$WORK/ompi-nsrsh" <<'RSH'
#!/bin/sh
host=$1; shift
case "$host" in 192.168.79.*) ;; *) echo "ompi-nsrsh: refusing $host" >&2; exit 1 ;; esac
i=$(( ${host##*.} - 10 ))
exec ip netns exec "tpb$i" unshare --uts sh -c "hostname tpb$i; $*"
RSH
chmod +x "$WORK/nsrsh" "$WORK/ompi-nsrsh"
printf '192.168.79.10 slots=2\n192.168.79.11 slots=2\n' >"$WORK/hosts"
ompi=""
if command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$WORK/mpi_coll_bench" "$SHARED/mpi_coll_bench.c" 2>/dev/null; then
	ompi=1
fi
"$WORK/netns.sh" up 2 "$RATE" >/dev/null
trap '"$WORK/netns.sh" down' EXIT

# hc MAP OP B E F [VAR=VALUE...]: one hcomm perf sweep (commas of the
# settings become + in the label, which is a CSV field).
hc() {
	map=$1 op=$2 b=$3 e=$4 f=$5
	shift 5
	xs=""
	for kv in "$@"; do xs="$xs -x $kv"; done
	ip netns exec tpb0 "$WORK/hcomm" run --hosts tpb0:2,tpb1:2 --map-by "$map" --rsh "$WORK/nsrsh" \
		--store-addr 192.168.79.10:0 --timeout 5m $xs -- \
		"$WORK/hcomm" perf -op "$op" -b "$b" -e "$e" -f "$f" -T 1s -csv -H -label "$(echo "hcomm $map $*" | tr , +)"
}

# om MAP OP B E F: one Open MPI sweep in the same namespaces.
om() {
	[ -n "$ompi" ] || return 0
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ip netns exec tpb0 unshare --uts sh -c \
		"hostname tpb0; exec mpirun.openmpi --hostfile $WORK/hosts -np 4 --map-by $1 \
		--mca plm_rsh_agent $WORK/ompi-nsrsh --mca pml ob1 --mca btl self,vader,tcp --mca mpi_yield_when_idle 1 \
		--mca btl_tcp_if_include 192.168.79.0/24 --mca oob_tcp_if_include 192.168.79.0/24 \
		$WORK/mpi_coll_bench -i 'ompi $1' -o $2 -b $3 -e $4 -f $5 -T 1 -H"
}

for _ in $(seq "$ROUNDS"); do
	hc slot allreduce,barrier 8 64M 8
	hc slot allreduce,barrier 8 64M 8 HCOMM_TOPOLOGY=off
	hc slot allreduce 8M 64M 8 HCOMM_ALGO=allreduce=hring
	om slot allreduce,barrier 8 64M 8
	hc node allreduce 8M 64M 8
	hc node allreduce 8M 64M 8 HCOMM_TOPOLOGY=off
	hc node allreduce 8M 64M 8 HCOMM_TOPOLOGY=off HCOMM_ALGO=allreduce=ring
	hc slot allgather,reducescatter 1M 16M 16
	hc slot allgather,reducescatter 1M 16M 16 HCOMM_ALGO=allgather=hring,reducescatter=hring
	om slot allgather,reducescatter 1M 16M 16
done
