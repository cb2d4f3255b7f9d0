package zcopy

import (
	"math"

	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/storepick"
)

// Whether a large copy-only symmetric call (AllGather, AllToAll) writes
// its blocks through the caches or around them is chosen by timing this
// rank's own copies, per call size (internal/storepick), because neither
// way wins everywhere on the machine this was measured on (2 cores,
// 2 MiB L2 each, 32 MiB L3). A 2-rank 8 MiB AllGather touches 24 MiB
// (two 4 MiB inputs, two 8 MiB outputs), which fits the L3: with the
// ranks alone on their cores plain stores can leave it there for the
// next call, while with other programs on the cores evicting it
// non-temporal stores were faster (in-process push, fastest call of 200:
// 188–208 µs around the caches against 274–452 µs through them, 3
// alternated runs under load).

// pickMax is the largest call output (bytes) whose stores are chosen by
// timing: beyond it the call's memory is larger than any last-level
// cache here, and its large blocks always go around the caches.
const pickMax = 32 << 20

// pickOff makes large blocks always go around the caches
// (BenchmarkSymmetric sets it to compare).
var pickOff bool

// storePick returns the chooser of call k among size ranks, or nil when
// its stores are not chosen by timing: not AllGather or AllToAll, blocks
// below symStreamMin (always through the caches) or output above pickMax
// (always around them).
func (r *Registry) storePick(k *Call, size int) *storepick.Pick {
	if (k.Coll != sched.AllGather && k.Coll != sched.AllToAll) || size < 2 {
		return nil
	}
	n := len(k.Out)
	if pickOff || n > pickMax || n/size < symStreamMin || symStreamMin == math.MaxInt {
		return nil
	}
	return r.picks.For(n)
}
