package zcopy

import "github.com/hcomm-go/hcomm/internal/sched"

// Where the ordinary program beats the zero-copy path on registered
// memory. The zero-copy path copies once, straight from the source rank's
// buffer, but it meets the peers twice per call (its records, then
// "done"), and one copier reading another rank's memory runs at about
// the memory's speed; the ordinary program copies twice, through the
// transport's ring, but pipelines: with two ranks on their own CPUs the
// sender and the receiver copy 256 KiB slots at once, in the caches, and
// never wait for each other as a whole. A rooted Broadcast gains the
// most from that: its one copier reads the root's memory while the ring
// has both ranks copy. Measured over shm between two rank processes on
// an idle machine (BENCHMARKS.md, zerocopy-ab.sh with ZC=1: hcomm perf
// with and without -registered, 3 alternated runs, means per call) the
// ordinary program was faster only for
//
//	Broadcast  512 KiB 24 µs against 72, 2 MiB 76 against 131
//	           (8 MiB: 490 against 491, a tie)
//
// and slower everywhere else: AllGather 2 MiB 152 µs against 67,
// AllToAll 2 MiB 149 against 78 (an earlier build, whose zero-copy
// copies of 1–4 MiB blocks wrote around the caches and whose ranks could
// share a CPU, was slower there), ReduceScatter, whose ordinary program
// reduces from the ring, by 1.0–1.6×. With more ranks than two the
// registered calls were faster at every size measured (4 ranks, loaded
// machine: 1.4–5.6× for AllGather, Broadcast and AllToAll from 256 KiB
// to 32 MiB; again for AllGather, AllToAll, Broadcast and ReduceScatter
// of 512 KiB–8 MiB, HCOMM_ZERO_COPY=off against 256K on registered
// buffers, 7 alternated runs: the per-call median 1.74–12.4× faster with
// the path, at most 2 runs of 7 the other way at any point, the means,
// which the load's tails carry, 0.95–5.9×), so the rule below holds only
// for two ranks; a tie goes to
// the zero-copy path, which was the faster under load: Broadcast below
// 8 MiB.
//
// HCOMM_ZERO_COPY=auto (the default) applies the rule from 256 KiB;
// an explicit size takes the zero-copy path for every candidate from that
// size, whatever the rule says (as before the rule).
type window struct {
	coll   sched.Coll
	lo, hi int // the ordinary program runs for lo <= bytes < hi
}

// ordinaryWins are the windows of two-rank calls where the ordinary
// program runs on registered memory under HCOMM_ZERO_COPY=auto.
var ordinaryWins = []window{
	{sched.Broadcast, 0, 8 << 20},
}

// Ordinary reports whether the rule of HCOMM_ZERO_COPY=auto runs a call
// of collective c over size ranks moving n bytes (Candidate's count, the
// same on every rank) by its ordinary program although its buffers are
// registered.
func Ordinary(c sched.Coll, size, n int) bool {
	if size != 2 {
		return false
	}
	for _, w := range ordinaryWins {
		if w.coll == c && n >= w.lo && n < w.hi {
			return true
		}
	}
	return false
}
