package algo

import (
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// tree is a rooted tree over the ranks 0..n−1.
type tree struct {
	root   int
	parent []int   // −1 at the root
	kids   [][]int // in increasing position order
}

// inorderTree builds the in-order binary tree over positions 1..n in which
// the parent of each position is the nearer of the closest positions left and
// right of it with more trailing zero bits: odd positions are leaves, even
// positions inner nodes, the depth is about log2 n. rankAt maps positions to
// ranks.
func inorderTree(n int, rankAt func(pos int) int) tree {
	t := tree{parent: make([]int, n), kids: make([][]int, n)}
	for x := 1; x <= n; x++ {
		k := bits.TrailingZeros(uint(x))
		left, right := x-1<<k, x+1<<k
		var par int
		switch {
		case left >= 1 && right <= n:
			par = left
			if bits.TrailingZeros(uint(right)) < bits.TrailingZeros(uint(left)) {
				par = right
			}
		case left >= 1:
			par = left
		case right <= n:
			par = right
		}
		r := rankAt(x)
		if par == 0 {
			t.root, t.parent[r] = r, -1
			continue
		}
		t.parent[r] = rankAt(par)
	}
	// Positions are visited in increasing order, so kids come out ordered.
	for x := 1; x <= n; x++ {
		if r := rankAt(x); t.parent[r] >= 0 {
			t.kids[t.parent[r]] = append(t.kids[t.parent[r]], r)
		}
	}
	return t
}

// doubleTree returns the two trees of dbtree. The first places rank r at
// position r+1, so even ranks are its leaves. The second mirrors it (rank r at
// position n−r) when n is even and shifts it (rank r at position r, rank 0 at
// n) when n is odd; either way the odd ranks are its leaves, so every rank is
// a leaf in at least one tree and inner in at most one.
func doubleTree(n int) [2]tree {
	second := func(pos int) int { return n - pos }
	if n%2 == 1 {
		second = func(pos int) int { return pos % n }
	}
	return [2]tree{
		inorderTree(n, func(pos int) int { return pos - 1 }),
		inorderTree(n, second),
	}
}

// timedOp is an op of one tree placed at a global time slot.
type timedOp struct {
	time, tree int
	op         sched.Op
}

// schedule holds the time slots of one tree's reduce and broadcast: every
// message is sent and received in the same slot on both ends, so ordering
// each rank's ops by slot yields a deadlock-free program, and the forwarding
// ops (recv-reduce-send, recv-copy-send) let a message and the one it feeds
// share a slot, which the executor pipelines.
type schedule struct {
	t      tree
	up     []int   // slot in which each rank sends to its parent (the root: its last receive)
	order  [][]int // each rank's kids in the order it reduces them
	down   []int   // slot in which each rank receives from its parent
	fwd    []int   // the kid each inner rank forwards to while receiving, −1 if none
	height []int
}

func newSchedule(t tree) *schedule {
	n := len(t.parent)
	s := &schedule{t: t, up: make([]int, n), order: make([][]int, n),
		down: make([]int, n), fwd: make([]int, n), height: make([]int, n)}
	s.reduceSlots(t.root)
	start := s.up[t.root] + 1
	for _, k := range t.kids[t.root] {
		s.broadcastSlots(k, start)
	}
	return s
}

// reduceSlots computes the reduce slots of x's subtree as early as possible:
// a leaf sends in slot 0, a rank with one kid forwards in its kid's slot, a
// rank with two kids reduces the earlier one first and forwards the later one
// strictly after.
func (s *schedule) reduceSlots(x int) {
	kids := s.t.kids[x]
	for _, k := range kids {
		s.reduceSlots(k)
		s.height[x] = max(s.height[x], s.height[k]+1)
	}
	switch len(kids) {
	case 0:
		s.up[x] = 0
	case 1:
		s.order[x] = []int{kids[0]}
		s.up[x] = s.up[kids[0]]
	default:
		a, b := kids[0], kids[1]
		if s.up[b] < s.up[a] {
			a, b = b, a
		}
		if s.up[b] <= s.up[a] {
			s.delay(b, s.up[a]+1)
		}
		s.order[x] = []int{a, b}
		s.up[x] = s.up[b]
	}
}

// delay moves x's send to its parent to slot at (later than now), together
// with the chain of forwards feeding it.
func (s *schedule) delay(x, at int) {
	if o := s.order[x]; len(o) > 0 {
		s.delay(o[len(o)-1], at)
	}
	s.up[x] = at
}

// broadcastSlots computes the broadcast slots of x's subtree, x receiving in
// slot at: it forwards to its taller kid in the same slot and sends to the
// other one in the next.
func (s *schedule) broadcastSlots(x, at int) {
	s.down[x] = at
	s.fwd[x] = -1
	kids := s.t.kids[x]
	if len(kids) == 0 {
		return
	}
	f := kids[0]
	for _, k := range kids[1:] {
		if s.height[k] > s.height[f] {
			f = k
		}
	}
	s.fwd[x] = f
	s.broadcastSlots(f, at)
	for _, k := range kids {
		if k != f {
			s.broadcastSlots(k, at+1)
		}
	}
}

// ops returns rank x's ops for a tree that reduces and broadcasts the
// elements [off, off+n).
func (s *schedule) ops(p *prog, x, treeIdx, off, n int) []timedOp {
	var ops []timedOp
	add := func(t int, op sched.Op) { ops = append(ops, timedOp{t, treeIdx, op}) }
	in, acc := p.in(off, n), out(off, n)
	par := s.t.parent[x]
	// Reduce.
	switch order := s.order[x]; len(order) {
	case 0:
		add(s.up[x], sched.SendOp(par, in))
	default:
		src := in
		for i, k := range order {
			last := i == len(order)-1
			if last && par >= 0 {
				add(s.up[k], sched.RecvReduceSendOp(k, par, src, acc))
			} else {
				add(s.up[k], sched.RecvReduceOp(k, src, acc))
			}
			src = acc
		}
	}
	// Broadcast.
	if par < 0 {
		for _, k := range s.t.kids[x] {
			add(s.up[x]+1, sched.SendOp(k, acc))
		}
		return ops
	}
	if s.fwd[x] < 0 {
		add(s.down[x], sched.RecvOp(par, acc))
		return ops
	}
	add(s.down[x], sched.RecvCopySendOp(par, s.fwd[x], acc))
	for _, k := range s.t.kids[x] {
		if k != s.fwd[x] {
			add(s.down[x]+1, sched.SendOp(k, acc))
		}
	}
	return ops
}

// dbtreeAllReduce runs two complementary binary trees at once, the first on
// the lower half of the vector and the second on the upper half; each
// reduces toward its root and broadcasts back. Ops of both trees that fall in
// the same slot share a step unless they would use the same channel, in which
// case the first tree's op goes first.
func dbtreeAllReduce(p *prog) {
	if p.n == 1 {
		copyInToOut(p, p.count(p.rank))
		return
	}
	dbtreeRank(p, dbtreeSchedules(p.n))
}

// dbtreeRank appends rank p.rank's steps given the trees' schedules.
func dbtreeRank(p *prog, scheds [2]*schedule) {
	r, c := p.rank, p.count(p.rank)
	_, half := sched.Block(c, 2, 0)
	parts := [2][2]int{{0, half}, {half, c - half}}
	var ops []timedOp
	for i, s := range scheds {
		if parts[i][1] == 0 {
			continue
		}
		ops = append(ops, s.ops(p, r, i, parts[i][0], parts[i][1])...)
	}
	slices.SortStableFunc(ops, func(a, b timedOp) int {
		if a.time != b.time {
			return a.time - b.time
		}
		return a.tree - b.tree
	})
	for i := 0; i < len(ops); {
		j := i + 1
		for j < len(ops) && ops[j].time == ops[i].time {
			j++
		}
		slot := ops[i:j]
		split := shareChannel(slot)
		var step []sched.Op
		for k, o := range slot {
			if split && k > 0 && o.tree != slot[k-1].tree {
				p.step(step...)
				step = nil
			}
			step = append(step, o.op)
		}
		p.step(step...)
		i = j
	}
}

// dbtreeLast caches the schedules of the last number of ranks: they cost
// O(n) to build and depend on n only, and building every rank's program
// (the simulator, the verifier's tests) would otherwise cost O(n²). They
// are not modified once built.
var dbtreeLast struct {
	sync.Mutex
	n int
	s [2]*schedule
}

func dbtreeSchedules(n int) [2]*schedule {
	dbtreeLast.Lock()
	defer dbtreeLast.Unlock()
	if dbtreeLast.n != n {
		t := doubleTree(n)
		dbtreeLast.n, dbtreeLast.s = n, [2]*schedule{newSchedule(t[0]), newSchedule(t[1])}
	}
	return dbtreeLast.s
}

// dbtreeTerms holds, per rank count, the unpipelined critical-path terms of
// dbtree (a Cost) and the busiest rank's load per pipelined piece (a Cost
// with Beta and Gamma per piece of the whole vector).
var dbtreeTerms sync.Map // int → [2]Cost

// dbtreeAllReduceCost prices dbtree. Its unpipelined terms have no closed
// form: the one-port interleaving of the two trees makes them irregular in
// p (26 messages on the critical path at p = 64, 20 at p = 63, against
// 2·log2 p slots), so they are measured once per p with sched.CriticalPath
// on the schedule itself. Pipelined in k pieces (the forwarding ops are),
// the first piece takes that path and every further piece adds the load of
// the busiest rank per piece: its messages and reductions in both trees.
// This pipelined part is a model, not a measurement (the IR does not cut
// messages into pieces); at k = 1 it is exact.
func dbtreeAllReduceCost(sh Shape) Cost {
	v, ok := dbtreeTerms.Load(sh.P)
	if !ok {
		v, _ = dbtreeTerms.LoadOrStore(sh.P, measureDbtree(sh.P))
	}
	t := v.([2]Cost)
	one, piece := t[0], t[1]
	k := chunks(sh, sh.N/2)
	return Cost{
		Alpha: one.Alpha + (k-1)*piece.Alpha,
		Beta:  (one.Beta + (k-1)*piece.Beta) / k,
		Gamma: (one.Gamma + (k-1)*piece.Gamma) / k,
	}
}

// measureDbtree returns dbtree's terms at p ranks (see dbtreeTerms).
func measureDbtree(p int) [2]Cost {
	const count = 2 // one element per tree: terms per element are exact
	s := sched.Uniform(sched.AllReduce, p, count, 0, false)
	scheds := dbtreeSchedules(p)
	progs := make([]*sched.Program, p)
	for r := range p {
		pr := newProg(s, r)
		dbtreeRank(pr, scheds)
		progs[r] = pr.program("dbtree")
	}
	a, errA := sched.CriticalPath(progs, sched.Rates{Alpha: 1})
	b, errB := sched.CriticalPath(progs, sched.Rates{Beta: 1})
	g, errG := sched.CriticalPath(progs, sched.Rates{Gamma: 1})
	if errA != nil || errB != nil || errG != nil {
		// Not reached for a valid schedule (the tests verify them);
		// never choose a broken one.
		inf := math.Inf(1)
		return [2]Cost{{inf, inf, inf, 0}, {inf, inf, inf, 0}}
	}
	one := Cost{Alpha: a, Beta: b / count, Gamma: g / count}
	// Per piece, a rank sends to its parent and its kids and receives
	// from them in each tree, and reduces what its kids send; each message
	// carries half the piece.
	var piece Cost
	for r := range p {
		msgs, reduced := 0, 0
		for _, s := range scheds {
			kids, up := len(s.t.kids[r]), 0
			if s.t.parent[r] >= 0 {
				up = 1
			}
			msgs += up + kids // as many sent as received
			reduced += kids
		}
		piece.Alpha = max(piece.Alpha, float64(msgs))
		piece.Beta = max(piece.Beta, float64(msgs)/2)
		piece.Gamma = max(piece.Gamma, float64(reduced)/2)
	}
	return [2]Cost{one, piece}
}

// shareChannel reports whether ops of different trees in one slot send to the
// same peer or receive from the same peer.
func shareChannel(slot []timedOp) bool {
	for i, a := range slot {
		for _, b := range slot[i+1:] {
			if a.tree == b.tree {
				continue
			}
			as, aok := a.op.Sends()
			bs, bok := b.op.Sends()
			if aok && bok && as == bs {
				return true
			}
			ar, aok := a.op.Receives()
			br, bok := b.op.Receives()
			if aok && bok && ar == br {
				return true
			}
		}
	}
	return false
}
