# Sourced by measure.sh and measure_tcp.sh: the machine's speed at the
# moment of every run. This machine runs whole jobs at two speeds for
# minutes at a time (BENCHMARKS.md: a 2-rank shm job 2–3× slower at every
# size in its slow periods), which splits a set whose runs fall in both.
# So every run file is bracketed by a probe, a 2-rank shared-memory ring
# AllReduce of 512 KiB (hcomm perf, -T 100ms; about 40 µs fast, 120 µs
# slow), taken just before and just after it (the probe after one run is
# the probe before the next), and DIR/probes.csv gets a line
#   file,before µs,after µs,start (Unix s),end
# scripts/simval then classes each run file by its probes (see its -mode)
# and fits and validates within one speed. PROBE=0 leaves the probes out.
#
#   probe_init DIR BIN   before the first run (BIN: the hcomm binary)
#   probe_start          before a run (probes unless the last run's after stands)
#   probe_end FILE       after a run whose output is FILE

probe_init() {
	probe_dir=$1 probe_bin=$2 probe_last=""
	if [ "${PROBE:-1}" != 0 ] && [ ! -f "$probe_dir/probes.csv" ]; then
		echo "file,before_us,after_us,start,end" >"$probe_dir/probes.csv"
	fi
}

# probe_once prints the probe's µs a call (0 if it failed).
probe_once() {
	local v
	v=$("$probe_bin" perf -n 2 -transport shm -op allreduce -b 512K -e 512K -T 100ms -csv \
		-algo allreduce=ring 2>/dev/null | awk -F, '$1=="hcomm"{print $5}') || v=0
	echo "${v:-0}"
}

probe_start() {
	[ "${PROBE:-1}" = 0 ] && return 0
	if [ -z "$probe_last" ]; then
		probe_last=$(probe_once)
	fi
	probe_t0=$(date +%s)
}

probe_end() {
	[ "${PROBE:-1}" = 0 ] && return 0
	local t1 after
	t1=$(date +%s)
	after=$(probe_once)
	echo "$(basename "$1"),$probe_last,$after,$probe_t0,$t1" >>"$probe_dir/probes.csv"
	probe_last=$after
}
