package sim

import (
	"math"
	"slices"
)

// Folding in time. Long runs of identical steps (ring's 2(n−1) steps of
// one block each, the inter-host ring of hier) settle into a steady state
// in which every period of the reference rank (simulated rank 0) — K of
// its steps, K up to 256 (a host's ranks a step apart make periods of
// several; when latency rules, a rack's one slow hop among its ranks
// makes a period of the rack's ranks) — moves the whole machine by the same time Δ: every rank's
// step, every pending event, piece in flight and resource's busy-until
// time is where it was a period before, Δ later. Once two consecutive
// periods show the same state relative to the reference's clock, with the
// same Δ and the same growth of every critical-path breakdown, the
// simulator jumps over the rest of the run: J periods at once, every time
// moved by J·Δ and every breakdown grown by J times its growth per period.
// J is bounded by the steps that are still identical to the one before on
// every rank, so the run after the jump is simulated as before. The state
// compared is canonical: times are relative to the reference's clock, busy
// times of resources already free count as free, a host's cores as a sorted
// set. The jump reproduces the step-by-step simulation to rounding (times
// compared to within 1e-11 relative); Options.NoFold turns it off. A state
// that grows — a channel whose queue of pieces sent ahead of the receiver
// lengthens every period — never repeats and is simulated step by step.
// The snapshots kept (2K+1) are bounded by foldBudget bytes: a large state
// is checked for shorter periods only.

// foldTol is the relative tolerance of time comparisons when folding.
const foldTol = 1e-11

// snapshot is the canonical state of the machine at a step start of the
// reference rank.
type snapshot struct {
	t      float64   // the reference's clock
	ref    int32     // the reference's next step
	hash   uint64    // of ints
	ints   []int64   // structure: relative steps, phases, pieces, queue lengths, waiters
	times  []float64 // times relative to t
	bds    []float64 // every breakdown's float parts, in a fixed order
	bdInts []int64   // their integer parts
	chunks int64
	events int64
}

// foldMax is the longest period, in steps of the reference, folding
// looks for (a host's ranks ahead of one another make periods of several
// steps; ring at 1 MiB on 16,384 ranks in racks of 256 has a period of
// 256).
const foldMax = 256

// foldBudget bounds the bytes of the snapshots folding keeps.
const foldBudget = 128 << 20

// folder holds the last snapshots and the steps' sameness table.
type folder struct {
	on     bool
	same   []bool      // same[s]: step s of a program repeats step s−1 exactly
	run    []int32     // run[s]: steps from s on that repeat their predecessor
	hist   []*snapshot // by the reference's step mod 2·foldMax+1
	max    int         // the longest period tried (foldMax, less for a large state)
	folds  int         // jumps made
	folded int64       // steps of the reference jumped over
	// Snapshots cost about as much as simulating a step: after
	// foldTries of them in a row without a jump, the next backoff steps
	// go without (backoff doubling each time, from foldTries·2).
	tries    int
	backoff  int32
	skipTill int32
}

// foldTries is how many snapshots in a row folding takes before backing
// off.
const foldTries = 4 * foldMax

// initFold prepares folding: which steps repeat the one before.
func (m *machine) initFold() {
	ps := m.ps
	nSteps := len(ps.stepOff) - 1
	f := &m.fold
	f.on = true
	f.max = foldMax
	f.hist = make([]*snapshot, 2*foldMax+1)
	f.same = make([]bool, nSteps)
	f.run = make([]int32, nSteps+1)
	for p := 0; p+1 < len(ps.progStep); p++ {
		lo, hi := ps.progStep[p], ps.progStep[p+1]
		for s := lo + 1; s < hi; s++ {
			f.same[s] = slices.Equal(ps.step(s), ps.step(s-1))
		}
	}
	for s := nSteps - 1; s >= 0; s-- {
		if f.same[s] {
			f.run[s] = f.run[s+1] + 1
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func clampRel(x, t float64) float64 { return max(x-t, 0) }

func appendBd(fs []float64, is []int64, b *Breakdown) ([]float64, []int64) {
	fs = append(fs, b.Alpha, b.Transfer, b.Queue, b.Reduce, b.Local)
	is = append(is, b.Msgs[0], b.Msgs[1], b.Msgs[2], b.Bytes[0], b.Bytes[1], b.Bytes[2])
	return fs, is
}

// take fills s with the machine's canonical state at time t.
func (m *machine) take(s *snapshot, t float64) {
	s.t, s.ref = t, m.ranks[0].step
	s.ints, s.times, s.bds, s.bdInts = s.ints[:0], s.times[:0], s.bds[:0], s.bdInts[:0]
	s.chunks, s.events = m.chunks, m.events
	ref := int64(m.ranks[0].step)
	for c := range m.ranks {
		rs := &m.ranks[c]
		s.ints = append(s.ints, int64(rs.step)-int64(rs.first)-(ref-int64(m.ranks[0].first)), int64(rs.pending), int64(len(rs.ops)),
			int64(rs.stepBd.Ranks[0]), int64(rs.stepBd.Ranks[1]), b2i(rs.fused))
		s.times = append(s.times, clampRel(rs.stepEnd, t))
		s.bds, s.bdInts = appendBd(s.bds, s.bdInts, &rs.stepBd)
		for i := range rs.ops {
			o := &rs.ops[i]
			ev := int64(0)
			if o.ev {
				ev = 1
				s.times = append(s.times, o.evT-t)
			}
			s.ints = append(s.ints, int64(o.phase), int64(o.i), ev, int64(o.bd.Ranks[0]), int64(o.bd.Ranks[1]),
				int64(o.kind), o.bytes, int64(o.peer), int64(o.to), int64(o.inCh), int64(o.outCh), int64(o.nch), int64(o.per),
				o.chunk, b2i(o.warm)|b2i(o.carry)<<1)
			s.times = append(s.times, clampRel(o.lastMin, t), o.gap)
			s.bds, s.bdInts = appendBd(s.bds, s.bdInts, &o.bd)
		}
	}
	for i := range m.chans {
		ch := &m.chans[i]
		s.ints = append(s.ints, int64(len(ch.q)-ch.head), int64(ch.waitRank), int64(ch.waitOp))
		for _, it := range ch.q[ch.head:] {
			s.times = append(s.times, it.first-t, it.last-t)
			s.ints = append(s.ints, int64(it.bd.Ranks[0]), int64(it.bd.Ranks[1]))
			s.bds, s.bdInts = appendBd(s.bds, s.bdInts, &it.bd)
		}
	}
	s.hash = 14695981039346656037
	for _, v := range s.ints {
		s.hash = (s.hash ^ uint64(v)) * 1099511628211
	}
	c := m.t.cores()
	for h := 0; h*c < len(m.cores); h++ {
		k := len(s.times)
		for _, v := range m.cores[h*c : (h+1)*c] {
			s.times = append(s.times, clampRel(v, t))
		}
		slices.Sort(s.times[k:])
	}
	for _, r := range [][]float64{m.mem, m.nicTx, m.nicRx, m.up, m.down} {
		for _, v := range r {
			s.times = append(s.times, clampRel(v, t))
		}
	}
}

func closeTo(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// sameState reports whether a and b are the same canonical state.
func sameState(a, b *snapshot, tol float64) bool {
	if !slices.Equal(a.ints, b.ints) || len(a.times) != len(b.times) || len(a.bds) != len(b.bds) {
		return false
	}
	for i := range a.times {
		if !closeTo(a.times[i], b.times[i], tol) {
			return false
		}
	}
	return true
}

// maybeFold is called between events when the reference rank has just
// started a step at time t. It takes a snapshot and, when for some period
// of K steps of the reference the states K and 2K steps ago are the same as
// now and the breakdowns grew alike over both, jumps.
func (m *machine) maybeFold(t float64) {
	f := &m.fold
	r0 := &m.ranks[0]
	if r0.step >= r0.last || f.run[r0.step] == 0 {
		clear(f.hist) // the next step differs: no steady state across it
		return
	}
	if r0.step < f.skipTill {
		return
	}
	if f.tries++; f.tries > foldTries {
		f.backoff = max(2*foldTries, min(2*f.backoff, 1<<16))
		f.skipTill, f.tries = r0.step+f.backoff, 0
		clear(f.hist)
		return
	}
	slot := int(r0.step) % len(f.hist)
	s := f.hist[slot]
	if s == nil {
		s = &snapshot{}
		f.hist[slot] = s
	}
	m.take(s, t)
	if len(s.times) > 1<<18 {
		// A large state: look for short periods only.
		f.max = max(1, min(f.max, (32<<20)/(8*len(s.times))))
	}
	// 2·max+1 snapshots of this size at most.
	f.max = max(1, min(f.max, foldBudget/(2*8*(len(s.ints)+len(s.times)+len(s.bds)+len(s.bdInts))+1)))
	tol := foldTol * max(t, 1e-9)
	for K := 1; K <= f.max; K++ {
		a, b := f.at(s.ref-int32(K)), f.at(s.ref-int32(2*K))
		if a == nil || b == nil || a.hash != s.hash || b.hash != s.hash || !sameState(a, s, tol) || !sameState(b, a, tol) {
			continue
		}
		d := make([]float64, len(s.bds))
		for i := range d {
			d[i] = s.bds[i] - a.bds[i]
			if !closeTo(d[i], a.bds[i]-b.bds[i], tol) {
				d = nil
				break
			}
		}
		if d == nil {
			continue
		}
		di := make([]int64, len(s.bdInts))
		for i := range di {
			di[i] = s.bdInts[i] - a.bdInts[i]
			if di[i] != a.bdInts[i]-b.bdInts[i] {
				di = nil
				break
			}
		}
		if di == nil {
			continue
		}
		dt := s.t - a.t
		if !(dt > 0) || !closeTo(dt, a.t-b.t, tol) {
			continue
		}
		// Jump J periods, J bounded by the steps still repeating on
		// every rank: each moves K steps per period.
		run := int64(math.MaxInt64)
		for c := range m.ranks {
			rs := &m.ranks[c]
			if rs.step >= rs.last {
				return
			}
			run = min(run, int64(f.run[rs.step]))
		}
		J := run / int64(K)
		if J < 1 {
			return
		}
		m.jump(J, int32(J)*int32(K), dt, d, di, s.chunks-a.chunks, s.events-a.events)
		clear(f.hist)
		f.tries, f.backoff = 0, 0
		f.folds++
		f.folded += J * int64(K)
		return
	}
}

// at returns the snapshot taken when the reference started step ref, if
// it is still kept.
func (f *folder) at(ref int32) *snapshot {
	if ref < 0 {
		return nil
	}
	s := f.hist[int(ref)%len(f.hist)]
	if s == nil || s.ref != ref {
		return nil
	}
	return s
}

// jump moves the machine J periods of dt ahead, every breakdown growing by
// J times d (its float parts) and di (its integer parts), in take's order.
func (m *machine) jump(J int64, steps int32, dt float64, d []float64, di []int64, dChunks, dEvents int64) {
	sh := float64(J) * dt
	fi, ii := 0, 0
	grow := func(b *Breakdown) {
		jf := float64(J)
		b.Alpha += jf * d[fi]
		b.Transfer += jf * d[fi+1]
		b.Queue += jf * d[fi+2]
		b.Reduce += jf * d[fi+3]
		b.Local += jf * d[fi+4]
		for k := range 3 {
			b.Msgs[k] += J * di[ii+k]
			b.Bytes[k] += J * di[ii+3+k]
		}
		fi += 5
		ii += 6
	}
	for c := range m.ranks {
		rs := &m.ranks[c]
		rs.step += steps
		rs.stepStart += sh
		rs.stepEnd += sh
		grow(&rs.stepBd)
		for i := range rs.ops {
			o := &rs.ops[i]
			if o.ev {
				o.evT += sh
			}
			o.lastMin += sh
			grow(&o.bd)
		}
	}
	for i := range m.chans {
		ch := &m.chans[i]
		for k := ch.head; k < len(ch.q); k++ {
			it := &ch.q[k]
			it.first += sh
			it.last += sh
			grow(&it.bd)
		}
	}
	for _, r := range [][]float64{m.cores, m.mem, m.nicTx, m.nicRx, m.up, m.down} {
		for i := range r {
			r[i] += sh
		}
	}
	for i := range m.heap {
		m.heap[i].t += sh
	}
	m.chunks += J * dChunks
	m.events += J * dEvents
}
