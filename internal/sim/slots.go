package sim

import (
	"errors"
	"fmt"
	"slices"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// Group calls. A small collective of ranks all on one host runs as one
// group call through the shared segment's slots (internal/transport/shm),
// not as a schedule: every rank writes its contribution to its own slot,
// then reads the slots it needs (every rank's for AllReduce, AllGather,
// Barrier, AllToAll and ReduceScatter, every rank's at the root of Reduce
// and Gather, the root's for Broadcast and Scatter) and copies or reduces
// them. A rank writes slot s mod SlotCount again only once every rank is
// done with the call that last used it, so a rank that only writes runs
// up to SlotCount−1 calls ahead.
//
// The model: a write holds a core of the host for the contribution's
// b·β·SHMCoreShare (plus SHMSwitch on an oversubscribed host, as a chunk
// does) and is visible SlotAlpha + b·β (+ SHMSwitch) after it starts; a
// rank reads once the last slot it needs is visible (SHMWake later if it
// had to wait on an oversubscribed host: it is seen at its next turn),
// taking a core for the bytes read (b·β each) and reduced (b·γ).

// SlotMax is the largest contribution of a rank to a group call (shm's
// groupMax), SlotCount the slots each rank uses round robin (shm's
// groupSlots; a test in the shm package holds the two equal).
const (
	SlotMax   = 1024
	SlotCount = 32
)

// SlotAlgo names the group path where an algorithm is reported (as the
// library's observer and ExplainPlan do).
const SlotAlgo = "shm-slots"

// ErrNoSlots is returned by Slots for a call that would not run as a
// group call.
var ErrNoSlots = errors.New("sim: not a group call")

// SlotFits reports whether coll at size bytes (as hcomm perf counts
// sizes) on n ranks of t runs as a group call when not forced to an
// algorithm: every rank on one host, 2 to 255 ranks, a collective with a
// group form and a rank's contribution at most SlotMax bytes.
func SlotFits(t Topology, coll sched.Coll, n int, bytes int64) bool {
	_, _, reported, err := Spec(coll, n, bytes)
	if err != nil || n < 2 || n > 255 || t.Hosts(n) != 1 {
		return false
	}
	c, ok := slotContribution(coll, n, reported)
	return ok && c <= SlotMax
}

// slotContribution returns a rank's contribution to a group call of coll
// whose size hcomm perf reports as reported, and whether coll has a group
// form.
func slotContribution(coll sched.Coll, n int, reported int64) (int64, bool) {
	switch coll {
	case sched.Barrier:
		return 0, true
	case sched.AllGather, sched.Gather:
		return reported / int64(n), true
	case sched.AllReduce, sched.Reduce, sched.Broadcast, sched.ReduceScatter, sched.Scatter, sched.AllToAll:
		return reported, true
	}
	return 0, false
}

// Slots predicts coll as a group call (see SlotFits) on n ranks of t, run
// opt.Repeat times back to back as hcomm perf's loop does.
func Slots(t Topology, coll sched.Coll, n int, bytes int64, opt Options) (Result, error) {
	if err := t.Check(); err != nil {
		return Result{}, err
	}
	if !SlotFits(t, coll, n, bytes) {
		return Result{}, fmt.Errorf("%w: %s of %d bytes on %d ranks", ErrNoSlots, coll, bytes, n)
	}
	_, _, reported, _ := Spec(coll, n, bytes)
	b, _ := slotContribution(coll, n, reported)
	if t.CacheFactor > 0 && t.CacheBytes > 0 {
		// A few KiB: always in cache.
		t.SHM.Beta *= t.CacheFactor
		t.Gamma *= t.CacheFactor
	}
	t.oversubscription(n)
	alpha := t.SlotAlpha
	if alpha == 0 {
		alpha = t.SHM.Alpha
	}
	const root = 0
	// What rank r writes and reads: bytes written, slots read, bytes
	// copied out of them and reduced.
	writes := func(r int) bool {
		return !(coll == sched.Broadcast || coll == sched.Scatter) || r == root
	}
	reads := func(r int) []int {
		var q []int
		switch coll {
		case sched.Broadcast, sched.Scatter:
			if r != root {
				q = []int{root}
			}
		case sched.Reduce, sched.Gather:
			if r != root {
				return nil
			}
			fallthrough
		default:
			for p := range n {
				if p != r {
					q = append(q, p)
				}
			}
		}
		return q
	}
	readWork := func(r int, k int) float64 {
		var copied, reduced int64
		switch coll {
		case sched.AllReduce, sched.Reduce:
			reduced = int64(k) * b
		case sched.ReduceScatter:
			reduced = int64(k) * b / int64(n)
		case sched.AllToAll:
			copied = int64(k) * b / int64(n)
		case sched.Barrier:
		default:
			copied = int64(k) * b
		}
		return float64(copied)*t.SHM.Beta + float64(reduced)*t.Gamma
	}
	cores := make([]float64, t.cores())
	core := func(now, work float64) float64 {
		k := 0
		for i := range cores {
			if cores[i] < cores[k] {
				k = i
			}
		}
		s := max(now, cores[k])
		cores[k] = s + work
		return s
	}
	reps := max(1, opt.Repeat)
	start := make([]float64, n)          // each rank's next call
	done := make([]float64, n*SlotCount) // rank r's end of call k at r*SlotCount + k%SlotCount
	visible := make([]float64, n)        // this call's slots
	path := make([]Breakdown, n)         // to each rank's present
	order := make([]int, n)              // ranks by start time
	wrote := make([]float64, n)          // when each rank finished writing this call
	wpath := make([]Breakdown, n)        // the path to it
	wcore := float64(b)*t.SHM.Beta*t.SHMCoreShare + t.SHMSwitch
	wlat := float64(b)*t.SHM.Beta + t.SHMSwitch
	var end float64
	var endBd Breakdown
	for k := range reps {
		for r := range order {
			order[r] = r
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case start[a] < start[b]:
				return -1
			case start[a] > start[b]:
				return 1
			}
			return 0
		})
		for _, r := range order {
			now := start[r]
			if k >= SlotCount {
				// The slot is free once everyone is done with call k−SlotCount.
				for q := range n {
					now = max(now, done[q*SlotCount+k%SlotCount])
				}
				path[r].Queue += now - start[r]
			}
			if !writes(r) {
				wrote[r], visible[r] = now, now
				continue
			}
			s := core(now, wcore)
			path[r].Queue += s - now
			path[r].Transfer += wlat
			wrote[r] = s + wlat
			visible[r] = s + wlat + alpha
		}
		copy(wpath, path)
		for _, r := range order {
			now, bd := wrote[r], path[r]
			q := reads(r)
			last := -1
			for _, p := range q {
				if last < 0 || visible[p] > visible[last] {
					last = p
				}
			}
			if last >= 0 {
				if visible[last] > now {
					// Waited: the path runs through the last writer.
					bd = wpath[last]
					bd.Alpha += alpha
					now = visible[last]
					if t.groupWake > 0 {
						now += t.groupWake
						bd.Queue += t.groupWake
					}
				}
				bd.Msgs[ClassSHM]++
				bd.Bytes[ClassSHM] += b
				w := readWork(r, len(q))
				s := core(now, w)
				bd.Queue += s - now
				bd.Reduce += w
				now = s + w
			}
			bd.Ranks = [2]int32{int32(r), int32(last)}
			path[r] = bd
			done[r*SlotCount+k%SlotCount] = now
			start[r] = now
			if now >= end {
				end, endBd = now, bd
			}
		}
	}
	res := Result{Algo: SlotAlgo, Coll: coll, N: n, Bytes: reported, Time: end, Critical: endBd,
		Simulated: n, Period: n, Chunks: int64(reps * n), Events: int64(reps * n), ModelBytes: int64(n) * (SlotCount + 3) * 8}
	if coll == sched.Barrier {
		res.Bytes = 0
	}
	if end > 0 && res.Bytes > 0 {
		res.AlgBW = float64(res.Bytes) / end / 1e9
		res.BusBW = res.AlgBW * BusFactor(coll, n)
	}
	return res, nil
}
