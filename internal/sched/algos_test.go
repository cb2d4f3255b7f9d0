package sched

// Small hand-written algorithms, one or two per collective, that the tests
// verify. They are deliberately plain; the real algorithms live elsewhere.

// mod returns i mod n in [0, n).
func mod(i, n int) int { return ((i % n) + n) % n }

// build runs gen for every rank of s.
func build(s Spec, gen func(s Spec, r int, b *Builder)) []*Program {
	progs := make([]*Program, s.N)
	for r := range s.N {
		b := NewBuilder("test", r, s.N)
		gen(s, r, b)
		progs[r] = b.Program()
	}
	return progs
}

// blockRegion returns block i (mod n) of count elements split n ways in buf.
func blockRegion(buf Buf, count, n, i int) Region {
	off, l := Block(count, n, mod(i, n))
	return R(buf, off, l)
}

// ringAllReduce is a ring reduce-scatter followed by a ring allgather, two
// ops per step. The same program is correct in place and out of place.
func ringAllReduce(s Spec, r int, b *Builder) {
	n, count := s.N, s.Count(0)
	if n == 1 {
		b.Step(CopyOp(R(In, 0, count), R(Out, 0, count)))
		return
	}
	next, prev := mod(r+1, n), mod(r-1, n)
	for k := range n - 1 {
		send := blockRegion(Out, count, n, r-k)
		if k == 0 {
			send.Buf = In
		}
		recv := blockRegion(Out, count, n, r-k-1)
		own := recv
		own.Buf = In
		b.Step(SendOp(next, send), RecvReduceOp(prev, own, recv))
	}
	for k := range n - 1 {
		b.Step(SendOp(next, blockRegion(Out, count, n, r+1-k)), RecvOp(prev, blockRegion(Out, count, n, r-k)))
	}
}

// displ returns the offset of block b of s.
func displ(s Spec, b int) Region { return R(Out, s.Displ(b), s.Count(b)) }

// rdAllGather is recursive doubling for a power-of-two number of ranks, with
// any counts.
func rdAllGather(s Spec, r int, b *Builder) {
	b.Step(CopyOp(R(In, 0, s.Count(r)), displ(s, r)))
	span := func(lo, d int) Region {
		return R(Out, s.Displ(lo), s.Displ(lo+d)-s.Displ(lo))
	}
	for d := 1; d < s.N; d <<= 1 {
		peer := r ^ d
		b.Step(SendOp(peer, span(r&^(d-1), d)), RecvOp(peer, span(peer&^(d-1), d)))
	}
}

// linearBroadcast sends the root's buffer to every rank in one step.
func linearBroadcast(s Spec, r int, b *Builder) {
	all := R(Out, 0, s.Count(0))
	if r != s.Root {
		b.Step(RecvOp(s.Root, all))
		return
	}
	var ops []Op
	for d := range s.N {
		if d != r {
			ops = append(ops, SendOp(d, all))
		}
	}
	b.Step(ops...)
}

// chainBroadcast forwards the root's buffer along a chain with RecvCopySend.
func chainBroadcast(s Spec, r int, b *Builder) {
	n := s.N
	q := mod(r-s.Root, n)
	all := R(Out, 0, s.Count(0))
	next, prev := mod(r+1, n), mod(r-1, n)
	switch {
	case n == 1:
	case q == 0:
		b.Step(SendOp(next, all))
	case q == n-1:
		b.Step(RecvOp(prev, all))
	default:
		b.Step(RecvCopySendOp(prev, next, all))
	}
}

// chainReduce reduces along a chain towards the root with RecvReduceSend,
// keeping partial sums in scratch on the ranks between.
func chainReduce(s Spec, r int, b *Builder) {
	n, c := s.N, s.Count(0)
	q := mod(r-s.Root, n)
	next, prev := mod(r+1, n), mod(r-1, n) // towards the tail, towards the root
	in := R(In, 0, c)
	switch {
	case n == 1:
		b.Step(CopyOp(in, R(Out, 0, c)))
	case q == 0:
		b.Step(RecvReduceOp(next, in, R(Out, 0, c)))
	case q == n-1:
		b.Step(SendOp(prev, in))
	default:
		b.NeedScratch(c)
		b.Step(RecvReduceSendOp(next, prev, in, R(Scratch, 0, c)))
	}
}

// disseminationBarrier exchanges empty messages at distances 1, 2, 4, ...
func disseminationBarrier(s Spec, r int, b *Builder) {
	for d := 1; d < s.N; d <<= 1 {
		b.Step(SendOp(mod(r+d, s.N), R(In, 0, 0)), RecvOp(mod(r-d, s.N), R(Out, 0, 0)))
	}
}

// ringReduceScatter keeps partial sums in scratch and ends with the rank's
// own block reduced into Out. Correct in place and out of place.
func ringReduceScatter(s Spec, r int, b *Builder) {
	n := s.N
	block := func(buf Buf, i int) Region {
		i = mod(i, n)
		return R(buf, s.Displ(i), s.Count(i))
	}
	if n == 1 {
		b.Step(CopyOp(block(In, 0), R(Out, 0, s.Count(0))))
		return
	}
	b.NeedScratch(s.Total())
	next, prev := mod(r+1, n), mod(r-1, n)
	for k := range n - 1 {
		send := block(Scratch, r-k-1)
		if k == 0 {
			send.Buf = In
		}
		dst := block(Scratch, r-k-2)
		if k == n-2 {
			dst = R(Out, 0, s.Count(r))
		}
		b.Step(SendOp(next, send), RecvReduceOp(prev, block(In, r-k-2), dst))
	}
}

// pairwiseAllToAll exchanges with rank r+k and r-k at step k. It is correct
// only out of place: in place, a received block overwrites a block still to
// be sent.
func pairwiseAllToAll(s Spec, r int, b *Builder) {
	n := s.N
	b.Step(CopyOp(R(In, s.SendDispl(r, r), s.Matrix[r][r]), R(Out, s.RecvDispl(r, r), s.Matrix[r][r])))
	for k := 1; k < n; k++ {
		to, from := mod(r+k, n), mod(r-k, n)
		b.Step(SendOp(to, R(In, s.SendDispl(r, to), s.Matrix[r][to])),
			RecvOp(from, R(Out, s.RecvDispl(r, from), s.Matrix[from][r])))
	}
}

// linearGather has every rank send its block to the root in one step.
func linearGather(s Spec, r int, b *Builder) {
	in := R(In, 0, s.Count(r))
	if r != s.Root {
		b.Step(SendOp(s.Root, in))
		return
	}
	ops := []Op{CopyOp(in, displ(s, r))}
	for src := range s.N {
		if src != r {
			ops = append(ops, RecvOp(src, displ(s, src)))
		}
	}
	b.Step(ops...)
}

// linearScatter has the root send every rank its block in one step.
func linearScatter(s Spec, r int, b *Builder) {
	out := R(Out, 0, s.Count(r))
	if r != s.Root {
		b.Step(RecvOp(s.Root, out))
		return
	}
	block := func(d int) Region { return R(In, s.Displ(d), s.Count(d)) }
	ops := []Op{CopyOp(block(r), out)}
	for d := range s.N {
		if d != r {
			ops = append(ops, SendOp(d, block(d)))
		}
	}
	b.Step(ops...)
}
