package copyeng

import (
	"context"
	"sync"
	"sync/atomic"
)

// A Splitter copies large blocks with an engine's workers and the caller
// together: the block is cut into one part per worker plus one, the
// workers' parts are posted with one doorbell, the caller copies the last
// part itself and then polls the others' status words. It pays only where
// the workers have CPUs of their own; with fewer CPUs than busy
// goroutines the hand-offs only add latency (see Auto).
//
// One split runs at a time; a Copy that finds a split in progress, or a
// block under Min, copies by itself. A Splitter allocates nothing per
// copy.
type Splitter struct {
	e     *Engine
	min   int
	mu    sync.Mutex
	descs []Desc
	ptrs  []*Desc
	move  func(dst, src []byte) // how a part is copied (nil: copy)
	job   Parter                // Run's job, while it runs
	// Splits counts the copies the engine took part in.
	Splits atomic.Uint64
}

// NewSplitter returns a splitter over e for blocks of at least min bytes,
// cut into parts+1 pieces. move, if set, copies a part (for example
// around the caches); nil means the built-in copy.
func NewSplitter(e *Engine, min, parts int, move func(dst, src []byte)) *Splitter {
	s := &Splitter{e: e, min: max(min, 1), descs: make([]Desc, parts), ptrs: make([]*Desc, parts), move: move}
	for i := range s.descs {
		s.ptrs[i] = &s.descs[i]
		if move != nil {
			s.descs[i].Mover = (*moveFunc)(s)
		}
	}
	return s
}

type moveFunc Splitter

func (m *moveFunc) Move(d *Desc) Status {
	if !InBounds(d.SrcOff, 1, d.Len, 0, len(d.Src)) || !InBounds(d.DstOff, 1, d.Len, 0, len(d.Dst)) {
		return OutOfBounds
	}
	m.move(d.Dst[d.DstOff:d.DstOff+d.Len], d.Src[d.SrcOff:d.SrcOff+d.Len])
	return OK
}

// Min returns the least block the splitter splits.
func (s *Splitter) Min() int { return s.min }

// Copy copies src into dst (the same length). It reports whether the
// engine took part.
func (s *Splitter) Copy(dst, src []byte) bool {
	n := len(dst)
	if s == nil || n < s.min || len(s.descs) == 0 || !s.mu.TryLock() {
		s.copy(dst, src)
		return false
	}
	defer s.mu.Unlock()
	parts := len(s.descs) + 1
	// Parts of whole cache lines; the caller takes the rest.
	step := n / parts &^ 63
	if step == 0 {
		s.copy(dst, src)
		return false
	}
	for i := range s.descs {
		d := &s.descs[i]
		d.Src, d.Dst, d.SrcOff, d.DstOff, d.Len = src, dst, i*step, i*step, step
	}
	k, _ := s.e.Post(context.Background(), s.ptrs...)
	rest := len(s.descs) * step
	s.copy(dst[rest:], src[rest:])
	// Closed or full: what was not posted is copied here.
	for _, d := range s.ptrs[k:] {
		s.copy(d.Dst[d.DstOff:d.DstOff+d.Len], d.Src[d.SrcOff:d.SrcOff+d.Len])
	}
	s.wait(s.ptrs[:k])
	s.Splits.Add(1)
	for i := range s.descs {
		s.descs[i].Src, s.descs[i].Dst = nil, nil // keep no memory alive
	}
	return true
}

// A Parter does parts of a job that a Splitter cuts up (Run): Part(lo, hi)
// does bytes [lo, hi) of it. Parts are disjoint and may run at once.
type Parter interface{ Part(lo, hi int) }

type partMover Splitter

func (m *partMover) Move(d *Desc) Status {
	m.job.Part(d.DstOff, d.DstOff+d.Len)
	return OK
}

// Run does job, n bytes long, with the engine's workers and the caller
// together, as Copy does a copy: parts of whole cache lines (so of whole
// elements of any type), one per worker plus the caller's, posted with
// one doorbell. A job under Min, or one that finds a split in progress, is
// done by the caller alone. It reports whether the engine took part. Run
// allocates nothing.
func (s *Splitter) Run(n int, job Parter) bool {
	if s == nil || n < s.min || len(s.descs) == 0 || !s.mu.TryLock() {
		job.Part(0, n)
		return false
	}
	defer s.mu.Unlock()
	step := n / (len(s.descs) + 1) &^ 63
	if step == 0 {
		job.Part(0, n)
		return false
	}
	s.job = job
	for i := range s.descs {
		d := &s.descs[i]
		d.Mover, d.DstOff, d.Len = (*partMover)(s), i*step, step
	}
	k, _ := s.e.Post(context.Background(), s.ptrs...)
	job.Part(len(s.descs)*step, n)
	// Closed or full: what was not posted is done here, and so is a
	// part the engine aborted (without running it).
	for _, d := range s.ptrs[k:] {
		job.Part(d.DstOff, d.DstOff+d.Len)
	}
	for _, d := range s.ptrs[:k] {
		if s.e.Poll(context.Background(), d) != nil {
			job.Part(d.DstOff, d.DstOff+d.Len)
		}
	}
	s.Splits.Add(1)
	s.job = nil
	for i := range s.descs {
		s.descs[i].Mover = nil
		if s.move != nil {
			s.descs[i].Mover = (*moveFunc)(s)
		}
	}
	return true
}

// wait polls the posted parts; a part the engine aborted (closed) is
// copied here, so Copy never returns with dst incomplete.
func (s *Splitter) wait(ds []*Desc) {
	for _, d := range ds {
		if s.e.Poll(context.Background(), d) != nil {
			s.copy(d.Dst[d.DstOff:d.DstOff+d.Len], d.Src[d.SrcOff:d.SrcOff+d.Len])
		}
	}
}

func (s *Splitter) copy(dst, src []byte) {
	if s != nil && s.move != nil {
		s.move(dst, src)
		return
	}
	copy(dst, src)
}

// Auto returns how many engine workers pay for a rank that shares cpus
// CPUs with local-1 other busy ranks: one per CPU beyond the rank's own
// share, at most 4 (0: the engine would only add hand-offs).
func Auto(cpus, local int) int {
	if local < 1 {
		local = 1
	}
	return min(cpus/local-1, 4)
}
