#!/usr/bin/env bash
# hcomm-extra.sh MODE - the `--extra` command of the peer harness
# (../shared/bench/run_baselines.sh) for hcomm: prints CSV rows in the
# harness's format for one rank count.
#
#   MODE shm     ranks as processes on this host, shared memory   (label hcomm-shm)
#   MODE tcp     the same, TCP forced on loopback                  (label hcomm-tcp)
#   MODE netns   one rank per network namespace cbench<i> (TCP over veth + bridge,
#                192.168.77.(10+i)), made with the harness's netns.sh (label hcomm-tcp-netns)
#
# The harness exports RANKS, MAXB, FACTOR and TARGET and runs this from its
# own directory. HCOMM_BIN names the hcomm binary (default: hcomm on PATH).
# OPS (default: the harness's six collectives) narrows what is measured.
# JSON_OUT (shm and tcp), a file, also gets the rows as `hcomm perf -json`
# prints them, appended: with each point's median call, each rank's CPU and
# whether ranks of one host shared one (stacked), which the harness's CSV
# has no room for.
set -euo pipefail
mode=${1:?usage: hcomm-extra.sh shm|tcp|netns}
bin=${HCOMM_BIN:-$(command -v hcomm)}
ops=${OPS:-allreduce,allgather,reducescatter,broadcast,alltoall,barrier}
common=(-op "$ops" -b 8 -f "${FACTOR:-4}" -T "${TARGET:-0.2}" -csv -H)
case "$mode" in
  shm | tcp)
    if [ -z "${JSON_OUT:-}" ]; then
      exec "$bin" perf -n "${RANKS:-2}" -transport "$mode" -e "${MAXB:-64M}" "${common[@]}" -label "hcomm-$mode"
    fi
    # The same rows as JSON, kept in JSON_OUT and written out as the CSV
    # lines -csv prints.
    "$bin" perf -n "${RANKS:-2}" -transport "$mode" -e "${MAXB:-64M}" "${common[@]/-csv/-json}" -label "hcomm-$mode" |
      tee -a "$JSON_OUT" | python3 -c '
import json, sys
for line in sys.stdin:
    if not line.startswith("{"):
        sys.stdout.write(line)
        continue
    r = json.loads(line)
    print("%s,%s,%d,%d,%.3f,%.4f,%.4f" % (r["impl"], r["op"], r["ranks"], r["bytes"], r["usec"], r["algbw_GBps"], r["busbw_GBps"]))
'
    ;;
  netns)
    n=${RANKS:-2}
    maxb=${MAXB:-64M}
    # like the harness's own namespace runs: at most 64 MiB
    case "$maxb" in *G | *g) maxb=64M ;; esac
    if [[ "$maxb" =~ ^([0-9]+)[Mm]$ ]] && ((BASH_REMATCH[1] > 64)); then maxb=64M; fi
    ./netns.sh up "$n" >/dev/null
    trap './netns.sh down >/dev/null 2>&1' EXIT
    rsh=$(mktemp /tmp/hcomm-nsrsh.XXXXXX)
    # hcomm run starts a remote rank as: RSH HOST env HCOMM_...=... PROG ARGS...
    cat >"$rsh" <<'RSH'
#!/bin/sh
host=$1
shift
case "$host" in
  cbench[0-9]*) ;;
  *) echo "nsrsh: refusing unknown host $host" >&2; exit 1 ;;
esac
exec ip netns exec "$host" sh -c "$*"
RSH
    chmod +x "$rsh"
    hosts=$(for ((i = 0; i < n; i++)); do printf 'cbench%d:1,' "$i"; done)
    ip netns exec cbench0 "$bin" run --hosts "${hosts%,}" --rsh "$rsh" --store-addr 192.168.77.10:0 -- \
      "$bin" perf -e "$maxb" "${common[@]}" -label hcomm-tcp-netns
    rc=$?
    rm -f "$rsh"
    exit $rc
    ;;
  *)
    echo "hcomm-extra.sh: unknown mode $mode (want shm, tcp or netns)" >&2
    exit 2
    ;;
esac
