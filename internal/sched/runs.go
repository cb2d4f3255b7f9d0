package sched

// Symbolic buffer contents.
//
// Every element of a buffer is undefined or holds a value (origin index,
// contribution set). Consecutive elements whose origin indices count up by
// one and whose sets are equal form a run, and regions move between buffers
// as lists of runs.
//
// A buffer of at most denseMax elements is stored densely, one cell per
// element: compact and cache-friendly, and a region costs its length. A
// larger buffer is stored as its list of runs in a treap ordered by
// position: reading or writing a region costs O(log runs + runs touched)
// whatever its length, so a million-element gather buffer made of a
// thousand blocks costs a thousand nodes, not a million cells.

// denseMax is the length up to which a buffer is stored densely.
const denseMax = 1 << 12

// cell is one element of a dense buffer.
type cell struct {
	idx int   // origin index
	set setID // contributors, or undefined
}

// run is a maximal or partial run of elements.
type run struct {
	off int   // position of the first element
	n   int   // number of elements, > 0
	idx int   // origin index of the first element; the k-th has idx+k
	set setID // contributors, or undefined (then idx is meaningless)
}

func (r run) end() int { return r.off + r.n }

// at returns the origin index of the element at position pos of r.
func (r run) at(pos int) int { return r.idx + pos - r.off }

// appendRun appends r to rs, merging it into the last run when r continues
// it.
func appendRun(rs []run, r run) []run {
	if n := len(rs); n > 0 {
		l := &rs[n-1]
		if l.end() == r.off && l.set == r.set && (r.set == undefined || l.idx+l.n == r.idx) {
			l.n += r.n
			return rs
		}
	}
	return append(rs, r)
}

// node is a treap node holding one run.
type node struct {
	run
	prio uint32
	l, r int32 // children; 0 is the nil node
}

// runArena holds the treap nodes of every buffer of one verification and
// recycles the nodes that writes drop.
type runArena struct {
	nodes []node // nodes[0] is the nil node
	free  []int32
	rng   uint64
}

func newRunArena() *runArena {
	return &runArena{nodes: make([]node, 1, 1024), rng: 0x9e3779b97f4a7c15}
}

// buffer is the symbolic storage of one buffer of one rank: dense cells
// if it has at most denseMax elements, else a treap of runs.
type buffer struct {
	dense []cell
	root  int32
	len   int
}

// newBuffer returns a buffer of n elements holding run r from position 0 on
// (r.off and r.n are ignored).
func (a *runArena) newBuffer(n int, r run) buffer {
	b := buffer{len: n}
	switch {
	case n == 0:
	case n <= denseMax:
		b.dense = make([]cell, n)
		if r.set != undefined {
			for i := range b.dense {
				b.dense[i] = cell{r.idx + i, r.set}
			}
		}
	default:
		r.off, r.n = 0, n
		b.root = a.newNode(r)
	}
	return b
}

func (a *runArena) newNode(r run) int32 {
	// xorshift64: deterministic priorities, so runs are reproducible.
	a.rng ^= a.rng << 13
	a.rng ^= a.rng >> 7
	a.rng ^= a.rng << 17
	nd := node{run: r, prio: uint32(a.rng >> 32)}
	if k := len(a.free); k > 0 {
		i := a.free[k-1]
		a.free = a.free[:k-1]
		a.nodes[i] = nd
		return i
	}
	a.nodes = append(a.nodes, nd)
	return int32(len(a.nodes) - 1)
}

// split splits treap t into the runs before pos and the runs from pos on,
// cutting the run that straddles pos in two.
func (a *runArena) split(t int32, pos int) (int32, int32) {
	if t == 0 {
		return 0, 0
	}
	nd := a.nodes[t]
	switch {
	case nd.off >= pos:
		l, r := a.split(nd.l, pos)
		a.nodes[t].l = r
		return l, t
	case nd.end() <= pos:
		l, r := a.split(nd.r, pos)
		a.nodes[t].r = l
		return t, r
	}
	// Every run of nd.l ends before pos and every run of nd.r starts after
	// it: only nd itself is cut.
	tail := a.newNode(run{off: pos, n: nd.end() - pos, idx: nd.at(pos), set: nd.set})
	a.nodes[t].n = pos - nd.off
	a.nodes[t].r = 0
	return t, a.merge(tail, nd.r)
}

// merge joins treaps x and y, every run of x lying before every run of y.
func (a *runArena) merge(x, y int32) int32 {
	if x == 0 {
		return y
	}
	if y == 0 {
		return x
	}
	if a.nodes[x].prio >= a.nodes[y].prio {
		a.nodes[x].r = a.merge(a.nodes[x].r, y)
		return x
	}
	a.nodes[y].l = a.merge(x, a.nodes[y].l)
	return y
}

// release returns the nodes of treap t to the free list.
func (a *runArena) release(t int32) {
	for t != 0 {
		a.release(a.nodes[t].l)
		a.free = append(a.free, t)
		t = a.nodes[t].r
	}
}

// read appends to dst the runs of positions [lo, lo+n) of b, with positions
// relative to lo, merged where they continue each other. The region must lie
// inside b.
func (a *runArena) read(b *buffer, lo, n int, dst []run) []run {
	if n == 0 {
		return dst
	}
	if b.dense != nil {
		for i, c := range b.dense[lo : lo+n] {
			dst = appendRun(dst, run{off: i, n: 1, idx: c.idx, set: c.set})
		}
		return dst
	}
	return a.collect(b.root, lo, lo+n, dst)
}

func (a *runArena) collect(t int32, lo, hi int, dst []run) []run {
	for t != 0 {
		nd := &a.nodes[t]
		switch {
		case nd.end() <= lo:
			t = nd.r
			continue
		case nd.off >= hi:
			t = nd.l
			continue
		}
		dst = a.collect(nd.l, lo, hi, dst) // allocates no node: nd stays valid
		s, e := max(nd.off, lo), min(nd.end(), hi)
		dst = appendRun(dst, run{off: s - lo, n: e - s, idx: nd.at(s), set: nd.set})
		t = nd.r
	}
	return dst
}

// write stores rs, whose positions are relative to lo and which cover
// [0, total) contiguously, at positions [lo, lo+total) of b. The region must
// lie inside b.
func (a *runArena) write(b *buffer, lo int, rs []run) {
	if len(rs) == 0 {
		return
	}
	if b.dense != nil {
		for _, r := range rs {
			d := b.dense[lo+r.off : lo+r.end()]
			if r.set == undefined {
				clear(d)
				continue
			}
			for i := range d {
				d[i] = cell{r.idx + i, r.set}
			}
		}
		return
	}
	total := rs[len(rs)-1].end()
	left, rest := a.split(b.root, lo)
	mid, right := a.split(rest, lo+total)
	a.release(mid)
	mid = 0
	for _, r := range rs {
		r.off += lo
		if r.set == undefined {
			r.idx = 0
		}
		mid = a.merge(mid, a.newNode(r))
	}
	b.root = a.merge(a.merge(left, mid), right)
}
