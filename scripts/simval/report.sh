#!/bin/bash
# Turns scripts/simval/idle.sh's measurements into the validation tables:
# OUT/report.md (also printed), each section's full simval output (every
# point with its runs) in OUT/simval-*.txt.
#   shared memory, fast runs: sim.Local()'s terms (what hcomm sim -topo
#     local predicts; fitted on an older set) and this set's own fit;
#   shared memory, slow runs: this set's own fit (when any run was slow);
#   every run whatever the speed (-mode all), summary only;
#   TCP: the fit on the fast runs, and every run.
# Usage: scripts/simval/report.sh OUT
set -euo pipefail
out=${1:?usage: scripts/simval/report.sh OUT}
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
go build -o "$out/simval" ./scripts/simval
# section NAME TITLE FULL args...: simval's output into simval-NAME.txt;
# its header and summary lines, and with FULL=1 its table, into the report.
section() {
	local name=$1 title=$2 full=$3
	shift 3
	echo
	echo "## $title"
	echo
	echo "\`go run ./scripts/simval $*\`"
	echo
	if ! "$out/simval" "$@" >"$out/simval-$name.txt" 2>&1; then
		echo "(none: $(tail -1 "$out/simval-$name.txt"))"
		return 0
	fi
	echo '```'
	grep '^#' "$out/simval-$name.txt"
	echo '```'
	if [ "$full" = 1 ] && [ "$(grep -c '^|' "$out/simval-$name.txt")" -gt 2 ]; then
		echo
		grep '^|' "$out/simval-$name.txt"
	fi
}
{
	echo "# Simulator validation: $(head -1 "$out/info" 2>/dev/null || echo "commit unknown")"
	echo
	sed 's/^/    /' "$out/info" 2>/dev/null || true
	# The probes in the order they were taken (µs; the machine's speed over time).
	sort -t, -k4,4n -m "$out/shm/probes.csv" "$out/tcp/probes.csv" 2>/dev/null |
		awk -F, '$1!="file"{printf "%s%.0f", (n++ ? " " : "\nProbes in order (µs, 2-rank shm ring AllReduce 512 KiB; after each run file): "), $3} END{if (n) print ""}'
	section shm-local "Shared memory, fast runs, sim.Local()'s terms" 1 -local -md "$out/shm"
	section shm-fit "Shared memory, fast runs, this set's own fit" 1 -md "$out/shm"
	section shm-slow "Shared memory, slow runs, their own fit" 1 -mode slow -md "$out/shm"
	section shm-all "Shared memory, every run whatever the speed, sim.Local()'s terms" 0 -mode all -local "$out/shm"
	section tcp "TCP, fast runs" 1 -tcp -md "$out/tcp"
	section tcp-all "TCP, every run whatever the speed" 0 -tcp -mode all "$out/tcp"
} >"$out/report.md"
cat "$out/report.md"
