#!/bin/sh
# topology-ab.sh — hcomm beside Open MPI across 2 network namespaces × 2
# ranks (issue 12: "≥ 1.0× at every size for every collective"), and the
# shaped-link topology rows of BENCHMARKS.md. Run as root from the
# repository root:
#
#   scripts/bench/topology-ab.sh [RATE] [ROUNDS] > rows.csv
#   python3 scripts/bench/topology-summary.py --vs ompi rows.csv
#
# SET (environment) says what runs, each setting once per round,
# alternated, so the medians compare settings measured side by side:
#   ompi    (default) every collective of the issue (AllReduce, AllGather,
#           ReduceScatter, Broadcast, AllToAll, Barrier), SIZES (default
#           8 B to 16 MiB, ×8), hcomm with default settings and Open MPI
#           (ob1, vader + tcp, yield when idle), consecutive (--map-by slot:
#           ranks 0,1 in tpb0) and interleaved (--map-by node: 0,2 in
#           tpb0) placement. Labels "hcomm slot", "ompi slot", "hcomm node",
#           "ompi node". About 6 minutes idle with ROUNDS=3 at 1gbit.
#   bcast   Broadcast of SIZES (e.g. SIZES="-b 8 -e 64 -f 8"), both
#           placements: hcomm's pick and the forms FORMS (default "hier
#           binomial") forced, then Open MPI. Each hcomm point gives two
#           rows: the mean call (label as above, "hcomm node" or "hcomm node
#           hier") and the median call (label + " med"): a loop of
#           Broadcasts runs ahead of its receivers, so under load the mean
#           is mostly the stalls and the median the per-call cost.
#   bind    the binding A/B on consecutive placement (MAPS to change):
#           OPS of SIZES under --bind-to auto (the default), none, and
#           "leaders" (--bind-to auto with ranks 0 and 3, the leaders auto
#           picks, pinned to CPUs 0 and 1 by taskset and the others left
#           unbound, which auto then leaves as they are); mean and median
#           rows as for bcast.
#   layout  the topology-off and forced-algorithm rows of BENCHMARKS.md's
#           "Topology across shaped links" (AllReduce 8 B–64 MiB, AllGather
#           and ReduceScatter 1–16 MiB).
#
# The veth links report 10000 Mb/s whatever tbf shapes them to, where a
# real NIC of RATE reports RATE; so by default (LINK=file) the hcomm jobs
# of SET=ompi get a topology file (HCOMM_RANK_TABLE, hcomm's own format)
# naming the placement and "link inter RATE", as discovery would on such
# a NIC. LINK=nic leaves hcomm with the veth's 10 Gbit/s (at 1gbit it then
# picks Bruck AllToAll at 32 KiB, 1.5× slower than pairwise there).
#
#   forms   the planner's pick against forced algorithms: OPS of SIZES
#           with the default settings ("hcomm P"), then every FORMS entry
#           OP=ALGO (e.g. "reducescatter=rh reducescatter=hier") as its own
#           job of OP ("hcomm P OP=ALGO"), then Open MPI, for each placement
#           of MAPS (default "slot node"); mean and median rows as for
#           bcast. `topology-summary.py --base -` prints each form against
#           the pick. BASE_BIN=PATH adds the pick of that hcomm binary
#           ("hcomm P base"), e.g. an older build, in every round.
#
# It builds hcomm into $WORK (HCOMM_BIN=PATH: run that binary instead),
# brings up namespaces NSPFX0, NSPFX1 (bridge namespace NSPFXbr, subnet
# 192.168.79.0/24 inside them; NSPFX defaults to "tpb" and this shell's
# process id, so that two runs at once keep apart), egress shaped to RATE
# (default 1gbit) with tc tbf, prints CSV rows labelled by setting, and
# takes the namespaces down. The files of a run are in a directory of its
# own under $WORK, removed at the end.
set -eu
RATE=${1:-1gbit}
ROUNDS=${2:-3}
SET=${SET:-ompi}
SIZES=${SIZES:--b 8 -e 16M -f 8}
OPS=${OPS:-allreduce,allgather,reducescatter,broadcast,alltoall,barrier}
WORK=${WORK:-/tmp/hcomm-topobench}
SHARED=${SHARED:-../shared/bench}
P=${NSPFX:-tpb$$}
mkdir -p "$WORK"
WORK=$(mktemp -d "$WORK/run.XXXXXX")
if [ -n "${HCOMM_BIN:-}" ]; then
	cp "$HCOMM_BIN" "$WORK/hcomm"
else
	go build -o "$WORK/hcomm" ./cmd/hcomm
fi
sed -e "s/^PFX=cbench/PFX=$P/" -e 's/^SUBNET_PREFIX=192.168.77/SUBNET_PREFIX=192.168.79/' "$SHARED/netns.sh" >"$WORK/netns.sh"
chmod +x "$WORK/netns.sh"
printf '#!/bin/sh\nhost=$1; shift\nexec ip netns exec "$host" sh -c "$*"\n' >"$WORK/nsrsh"
cat >"$WORK/ompi-nsrsh" <<RSH
#!/bin/sh
host=\$1; shift
case "\$host" in 192.168.79.*) ;; *) echo "ompi-nsrsh: refusing \$host" >&2; exit 1 ;; esac
i=\$(( \${host##*.} - 10 ))
exec ip netns exec "$P\$i" unshare --uts sh -c "hostname $P\$i; \$*"
RSH
chmod +x "$WORK/nsrsh" "$WORK/ompi-nsrsh"
printf '192.168.79.10 slots=2\n192.168.79.11 slots=2\n' >"$WORK/hosts"
ompi=""
if command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$WORK/mpi_coll_bench" "$SHARED/mpi_coll_bench.c" 2>/dev/null; then
	ompi=1
elif [ "$SET" = ompi ]; then
	echo "topology-ab.sh: Open MPI (mpicc.openmpi) not found; SET=ompi needs it" >&2
	exit 1
fi
printf 'link inter %s\nhost %s0 ranks 0-1\nhost %s1 ranks 2-3\n' "$RATE" "$P" "$P" >"$WORK/slot.topo"
printf 'link inter %s\nhost %s0 ranks 0,2\nhost %s1 ranks 1,3\n' "$RATE" "$P" "$P" >"$WORK/node.topo"
trap '"$WORK/netns.sh" down >/dev/null 2>&1; rm -rf "$WORK"' EXIT
"$WORK/netns.sh" up 2 "$RATE" >/dev/null

# hc MAP OP SIZEFLAGS T LABEL [VAR=VALUE...]: one hcomm perf sweep.
hc() {
	map=$1 op=$2 sizes=$3 t=$4 label=$5
	shift 5
	xs=""
	for kv in "$@"; do xs="$xs -x $kv"; done
	ip netns exec "${P}0" "$WORK/hcomm" run --hosts "${P}0:2,${P}1:2" --map-by "$map" --rsh "$WORK/nsrsh" \
		--store-addr 192.168.79.10:0 --timeout 10m $xs -- \
		"$WORK/hcomm" perf -op "$op" $sizes -T "$t" -csv -H -label "$label"
}

# om MAP OP SIZEFLAGS T LABEL: one Open MPI sweep in the same namespaces.
om() {
	[ -n "$ompi" ] || return 0
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ip netns exec "${P}0" unshare --uts sh -c \
		"hostname ${P}0; exec mpirun.openmpi --hostfile $WORK/hosts -np 4 --map-by $1 \
		--mca plm_rsh_agent $WORK/ompi-nsrsh --mca pml ob1 --mca btl self,vader,tcp --mca mpi_yield_when_idle 1 \
		--mca btl_tcp_if_include 192.168.79.0/24 --mca oob_tcp_if_include 192.168.79.0/24 \
		$WORK/mpi_coll_bench -i '$5' -o $2 $3 -T ${4%s} -H"
}

# hcj MAP LABEL PERFARGS -- RUNARGS: one hcomm perf job printing -json,
# turned into CSV rows: LABEL with the mean call, "LABEL med" with the
# median call.
hcj() {
	map=$1 label=$2
	shift 2
	pa=""
	while [ "$1" != -- ]; do pa="$pa $1"; shift; done
	shift
	ip netns exec "${P}0" "$bin" run --hosts "${P}0:2,${P}1:2" --map-by "$map" --rsh "$WORK/nsrsh" \
		--store-addr 192.168.79.10:0 --timeout 10m -x HCOMM_RANK_TABLE="$WORK/$map.topo" "$@" -- \
		$wrap "$bin" perf $pa -json -label "$label" |
		python3 -c 'import json, sys
for line in sys.stdin:
    if line.startswith("{"):
        r = json.loads(line)
        for lab, us in ((r["impl"], r["usec"]), (r["impl"] + " med", r.get("med_usec", 0))):
            print("%s,%s,%d,%d,%.3f,%.4f,%.4f" % (lab, r["op"], r["ranks"], r["bytes"], us, r["algbw_GBps"], r["busbw_GBps"]))'
}
printf '#!/bin/sh\ncase $HCOMM_RANK in 0) exec taskset -c 0 "$@";; 3) exec taskset -c 1 "$@";; *) exec "$@";; esac\n' >"$WORK/leaders.sh"
chmod +x "$WORK/leaders.sh"
wrap="" bin="$WORK/hcomm"
if [ -n "${BASE_BIN:-}" ]; then
	cp "$BASE_BIN" "$WORK/hcomm-base"
fi

# label SETTINGS...: the CSV label of an hcomm setting (commas of the
# settings become +, since the label is a CSV field).
label() { echo "hcomm $*" | tr , +; }

for _ in $(seq "$ROUNDS"); do
	case $SET in
	ompi)
		for map in slot node; do
			if [ "${LINK:-file}" = file ]; then
				hc "$map" "$OPS" "$SIZES" 0.25 "hcomm $map" HCOMM_RANK_TABLE="$WORK/$map.topo"
			else
				hc "$map" "$OPS" "$SIZES" 0.25 "hcomm $map"
			fi
			om "$map" "$OPS" "$SIZES" 0.25 "ompi $map"
		done
		;;
	bcast)
		for map in slot node; do
			hcj "$map" "hcomm $map" -op broadcast $SIZES -T 0.3 --
			for f in ${FORMS:-hier binomial}; do
				hcj "$map" "hcomm $map $f" -op broadcast $SIZES -T 0.3 -algo broadcast=$f --
			done
			om "$map" broadcast "$SIZES" 0.3 "ompi $map"
		done
		;;
	bind)
		for map in ${MAPS:-slot}; do
			for b in auto none leaders; do
				wrap="" bt=$b
				if [ $b = leaders ]; then wrap="$WORK/leaders.sh" bt=auto; fi
				hcj "$map" "hcomm $map $b" -op "$OPS" $SIZES -T 0.5 -- --bind-to $bt
			done
			wrap=""
		done
		;;
	forms)
		for map in ${MAPS:-slot node}; do
			hcj "$map" "hcomm $map" -op "$OPS" $SIZES -T 0.3 --
			if [ -n "${BASE_BIN:-}" ]; then
				bin="$WORK/hcomm-base"
				hcj "$map" "hcomm $map base" -op "$OPS" $SIZES -T 0.3 --
				bin="$WORK/hcomm"
			fi
			for f in ${FORMS:-}; do
				hcj "$map" "hcomm $map $f" -op "${f%%=*}" $SIZES -T 0.3 -algo "$f" --
			done
			om "$map" "$OPS" "$SIZES" 0.3 "ompi $map"
		done
		;;
	layout)
		hc slot allreduce,barrier "-b 8 -e 64M -f 8" 1 "$(label slot)"
		hc slot allreduce,barrier "-b 8 -e 64M -f 8" 1 "$(label slot HCOMM_TOPOLOGY=off)" HCOMM_TOPOLOGY=off
		hc slot allreduce "-b 8M -e 64M -f 8" 1 "$(label slot HCOMM_ALGO=allreduce=hring)" HCOMM_ALGO=allreduce=hring
		om slot allreduce,barrier "-b 8 -e 64M -f 8" 1 "ompi slot"
		hc node allreduce "-b 8M -e 64M -f 8" 1 "$(label node)"
		hc node allreduce "-b 8M -e 64M -f 8" 1 "$(label node HCOMM_TOPOLOGY=off)" HCOMM_TOPOLOGY=off
		hc node allreduce "-b 8M -e 64M -f 8" 1 "$(label node HCOMM_TOPOLOGY=off HCOMM_ALGO=allreduce=ring)" HCOMM_TOPOLOGY=off HCOMM_ALGO=allreduce=ring
		hc slot allgather,reducescatter "-b 1M -e 16M -f 16" 1 "$(label slot)"
		hc slot allgather,reducescatter "-b 1M -e 16M -f 16" 1 "$(label slot HCOMM_ALGO=allgather=hring,reducescatter=hring)" HCOMM_ALGO=allgather=hring,reducescatter=hring
		om slot allgather,reducescatter "-b 1M -e 16M -f 16" 1 "ompi slot"
		;;
	*)
		echo "topology-ab.sh: SET=$SET: want ompi, bcast, bind, forms or layout" >&2
		exit 2
		;;
	esac
done
