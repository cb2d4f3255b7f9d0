//go:build zcopyphase

package zcopy

import (
	"fmt"
	"os"
	"slices"
	"time"
)

// With the zcopyphase tag, a symmetric call stamps the moments between
// its phases (BenchmarkSymmetric reports them):
//
//	phBegin   Begin entered
//	phSent1   the first round's records are out
//	phMet     every peer's first record is in (the meeting)
//	phMoved   the peers' blocks are copied
//	phSent2   the done records are out
//	phOwn     the own block is copied
//	phDone    every peer's done record is in
//
// and keeps the last calls' stamps; releasing a buffer prints their
// medians to $TMPDIR/zcopyphase-<pid>.txt (hcomm perf -registered frees
// its buffers after each size), a line per size and rank.
type phases struct {
	t    [phN]int64 // ns since phaseBase
	kept [][phN]int64
}

var phaseBase = time.Now()

func (r *Registry) mark(i int) {
	r.ph.t[i] = int64(time.Since(phaseBase))
	if i == phDone && len(r.ph.kept) < 1<<14 {
		r.ph.kept = append(r.ph.kept, r.ph.t)
	}
}

// Phases returns the stamps of the last symmetric call (zcopyphase).
func (r *Registry) Phases() [phN]int64 { return r.ph.t }

// PhaseTrace reports whether the build stamps phases.
const PhaseTrace = true

// phaseFlush prints the kept calls' phase medians (µs) and forgets them.
func (r *Registry) phaseFlush() {
	k := r.ph.kept
	if len(k) == 0 {
		return
	}
	med := func(f func(t [phN]int64) int64) float64 {
		v := make([]int64, len(k))
		for i, t := range k {
			v[i] = f(t)
		}
		slices.Sort(v)
		return float64(v[len(v)/2]) / 1e3
	}
	f, err := os.OpenFile(fmt.Sprintf("%s/zcopyphase-%d.txt", os.TempDir(), os.Getpid()), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "zcopyphase pid %d: %d calls, medians µs: call %.1f copy %.1f (peer %.1f own %.1f) wait1 %.1f wait2 %.1f sent1 %.1f sent2 %.1f\n",
		os.Getpid(), len(k),
		med(func(t [phN]int64) int64 { return t[phDone] - t[phBegin] }),
		med(func(t [phN]int64) int64 { return t[phMoved] - t[phMet] + t[phOwn] - t[phSent2] }),
		med(func(t [phN]int64) int64 { return t[phMoved] - t[phMet] }),
		med(func(t [phN]int64) int64 { return t[phOwn] - t[phSent2] }),
		med(func(t [phN]int64) int64 { return t[phMet] - t[phSent1] }),
		med(func(t [phN]int64) int64 { return t[phDone] - t[phOwn] }),
		med(func(t [phN]int64) int64 { return t[phSent1] - t[phBegin] }),
		med(func(t [phN]int64) int64 { return t[phSent2] - t[phMoved] }))
	r.ph.kept = r.ph.kept[:0]
}
