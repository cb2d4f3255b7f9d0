#!/usr/bin/env bash
# race-time.sh OLD NEW [OUT]: wall time of the root package's tests that
# dominated `make race` (the failure-notice trials, the large AllReduce)
# under the race detector at commits OLD and NEW, then what `make notice`
# runs (the failure-notice trials without the race detector) at NEW. Test
# binaries are built first, outside the timings. RUN overrides the tests'
# pattern. Prints one line per run: commit, what, seconds. About 5 minutes
# on an idle 2-core machine.
set -euo pipefail
old=${1:?usage: race-time.sh OLD NEW [OUT]}
new=${2:?usage: race-time.sh OLD NEW [OUT]}
out=${3:-/tmp/race-time}
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
work=$(mktemp -d)
trap 'for c in old new; do git -C "$repo" worktree remove --force "$work/$c" 2>/dev/null || true; done; rm -rf "$work"' EXIT
for c in old new; do
  rev=${!c}
  git -C "$repo" worktree add -q --detach "$work/$c" "$rev"
  (cd "$work/$c" && go test -race -c -o "$work/$c.race.test" . && go test -c -o "$work/$c.test" .)
done
run=${RUN:-'^(TestFailureNotice.*|TestAllReduceLarge)$'}
for round in 1; do
  for c in old new; do
    s=$(date +%s.%N)
    (cd "$work/$c" && "$work/$c.race.test" -test.run "$run" -test.count=1 >"$out/$c-race-$round.txt" 2>&1) || echo "$c: FAILED (see $out/$c-race-$round.txt)"
    printf '%s race %s %.1f\n' "$c" "$round" "$(echo "$(date +%s.%N) - $s" | bc)"
  done
done | tee "$out/times.txt"
s=$(date +%s.%N)
(cd "$work/new" && "$work/new.test" -test.run "${RUN:-^TestFailureNotice}" -test.count=1 >"$out/new-notice.txt" 2>&1) || echo "new notice: FAILED"
printf 'new notice %.1f\n' "$(echo "$(date +%s.%N) - $s" | bc)" | tee -a "$out/times.txt"
