package zcopy

import (
	"runtime"
	"sync"

	"github.com/hcomm-go/hcomm/internal/copyeng"
	"github.com/hcomm-go/hcomm/internal/reduce"
)

// AutoMin is the least copy the engine splits under HCOMM_COPY_ENGINE=auto.
const AutoMin = 4 << 20

// Engine is a communicator's copy engine, started the first time a
// registered buffer or window asks for it and only when it pays.
type Engine struct {
	mu   sync.Mutex
	made bool
	e    *copyeng.Engine
	s    *copyeng.Splitter
}

// EngineWorkers returns the engine's workers and the least copy it
// splits, for the setting (HCOMM_COPY_ENGINE: 0 auto, < 0 off, > 0 the
// least bytes), local ranks sharing the machine's CPUs, and the CPUs this
// rank is pinned to (nil: none). Auto gives a worker per CPU beyond the
// rank's share and none when there is no spare CPU: on 2 cores with 2
// ranks, forcing it on made most registered-memory collectives of 4–16 MiB
// slower (0.29–0.54× in 4 of 7 points, medians of 3 under load), the
// hand-offs going to a worker without a core of its own. A size forces
// at least one worker.
func EngineWorkers(setting, local int, pinned []int) (workers, min int) {
	if setting < 0 {
		return 0, 0
	}
	if len(pinned) > 0 {
		workers = copyeng.Auto(len(pinned), 1)
	} else {
		workers = copyeng.Auto(runtime.NumCPU(), local)
	}
	if setting == 0 {
		return workers, AutoMin
	}
	return max(workers, 1), setting
}

// Splitter returns the communicator's splitter, starting the engine the
// first time (nil: no engine). pin, if set, runs first on every worker.
func (x *Engine) Splitter(setting, local int, pinned []int, pin func()) *copyeng.Splitter {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.made {
		return x.s
	}
	x.made = true
	w, min := EngineWorkers(setting, local, pinned)
	if w <= 0 {
		return nil
	}
	x.e = copyeng.New(&copyeng.Config{Workers: w, Depth: 64, Pin: pin})
	x.s = copyeng.NewSplitter(x.e, min, w, Copy)
	return x.s
}

// Close stops the engine; splitters copy by themselves afterwards.
func (x *Engine) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.made = true
	if x.e != nil {
		x.e.Close()
	}
}

// symStreamMin is the least block a symmetric call (AllGather, AllToAll,
// AllReduce's copies: every rank copying at once) writes around the
// caches; the rooted calls use reduce.StreamMin. It is reduce.StreamMin
// too: under load, plain stores were neither faster nor slower at any
// size (BENCHMARKS.md); BenchmarkSymmetric sets it to compare.
var symStreamMin = reduce.StreamMin

// copy copies a block into the call's output, split over the engine's
// workers when there is one and the block is large, else written around
// the caches from r.ntMin bytes.
func (r *Registry) copy(dst, src []byte) {
	switch {
	case r.Split != nil:
		r.Split.Copy(dst, src)
	case len(dst) >= r.ntMin:
		reduce.CopyStream(dst, src)
	default:
		plainCopy(dst, src)
	}
}

// plainPiece is the most plainCopy copies at once: the runtime's copy
// (memmove on amd64) writes around the caches from 1 MiB on, whatever
// the caller meant.
const plainPiece = 512 << 10

// plainCopy copies src to dst through the caches: a block below the
// path's threshold for writing around them (ntMin) stays in the caches
// even when it is 1 MiB or more, where one runtime copy would not.
func plainCopy(dst, src []byte) {
	for len(dst) > plainPiece && len(src) > plainPiece {
		copy(dst[:plainPiece], src[:plainPiece])
		dst, src = dst[plainPiece:], src[plainPiece:]
	}
	copy(dst, src)
}
