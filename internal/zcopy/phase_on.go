//go:build zcopyphase

package zcopy

import "time"

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
type phases struct {
	t [phN]int64 // ns since phaseBase
}

var phaseBase = time.Now()

func (r *Registry) mark(i int) { r.ph.t[i] = int64(time.Since(phaseBase)) }

// Phases returns the stamps of the last symmetric call (zcopyphase).
func (r *Registry) Phases() [phN]int64 { return r.ph.t }

// PhaseTrace reports whether the build stamps phases.
const PhaseTrace = true
