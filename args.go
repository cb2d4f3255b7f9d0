package hcomm

import (
	"context"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// args is one call as the user made it: the arguments of its Bytes form.
// The typed, Bytes and Async forms of every operation describe their call
// this way; check is the one argument checker for all of them, and do the
// one way to run a described call.
type args struct {
	coll       sched.Coll // sched.SendRecv for Send and Recv
	v          bool       // the V form: counts given (AllGatherV, ReduceScatterV, AllToAllV)
	recvSide   bool       // Recv rather than Send
	send, recv []byte     // Broadcast's and Recv's buffer is recv, Send's is send
	dt         DType
	op         Op
	root       int // the root, or the peer of Send and Recv
	tag        int
	counts     []int // counts, or AllToAllV's sendCounts
	recvCounts []int // AllToAllV's recvCounts
}

// name is the operation's name as the user called it.
func (a *args) name() string {
	switch {
	case a.coll == sched.SendRecv && a.recvSide:
		return "Recv"
	case a.coll == sched.SendRecv:
		return "Send"
	case a.v:
		return vNames[a.coll]
	}
	return a.coll.String()
}

// errNilCtx refuses a nil ctx before the call takes a sequence number, so
// the communicator stays usable and in step with its peers.
var errNilCtx = invalid("nil ctx")

var vNames = [...]string{sched.AllGather: "AllGatherV", sched.ReduceScatter: "ReduceScatterV", sched.AllToAll: "AllToAllV"}

// do runs a described call.
func (c *Comm) do(ctx context.Context, a *args) error {
	if ctx == nil {
		return c.argErr(a.name(), errNilCtx)
	}
	switch a.coll {
	case sched.Barrier:
		return c.Barrier(ctx)
	case sched.SendRecv:
		if a.recvSide {
			return c.p2p(ctx, "Recv", a.recv, a.dt, a.root, a.tag, false)
		}
		return c.p2p(ctx, "Send", a.send, a.dt, a.root, a.tag, true)
	}
	var k call
	if err := c.check(a, &k); err != nil {
		return c.argErr(k.name, err)
	}
	return c.run(ctx, &k)
}

// checkArgs checks a described call's arguments without running it (the
// Async forms check at enqueue time).
func (c *Comm) checkArgs(a *args) error {
	switch a.coll {
	case sched.Barrier:
		return nil
	case sched.SendRecv:
		buf := a.send
		if a.recvSide {
			buf = a.recv
		}
		if _, _, err := c.checkP2P(buf, a.dt, a.root, a.tag); err != nil {
			return c.argErr(a.name(), err)
		}
		return nil
	}
	var k call
	if err := c.check(a, &k); err != nil {
		return c.argErr(k.name, err)
	}
	return nil
}

// layout describes the buffers of a collective whose ranks all pass the
// same count: the block buffer holds this rank's count elements; the other
// holds one block, or Size() of them (wide).
type layout struct {
	blockIsSend bool // the block is send (else recv)
	single      bool // one buffer only (Broadcast's buf)
	wide        bool // the other buffer holds Size() blocks
	rootOnly    bool // the other buffer matters only at the root
	at          int  // in place, the block sits at: atStart, atRank or atRoot of the other
	divisible   bool // the block holds Size() per-rank blocks (AllToAll)
}

const (
	atStart = iota
	atRank
	atRoot
)

var layouts = [...]layout{
	sched.AllReduce:     {blockIsSend: true},
	sched.Reduce:        {blockIsSend: true, rootOnly: true},
	sched.Broadcast:     {single: true},
	sched.AllGather:     {blockIsSend: true, wide: true, at: atRank},
	sched.ReduceScatter: {wide: true, at: atRank},
	sched.AllToAll:      {blockIsSend: true, divisible: true},
	sched.Gather:        {blockIsSend: true, wide: true, rootOnly: true, at: atRoot},
	sched.Scatter:       {wide: true, rootOnly: true, at: atRoot},
}

// check checks a collective's arguments and describes the call to run in
// k. Nothing is sent for a call that fails it.
func (c *Comm) check(a *args, k *call) error {
	coll := a.coll
	*k = call{name: a.name(), coll: coll}
	d, err := c.checkDT(a.dt)
	if err != nil {
		return err
	}
	k.dt = d
	if coll.Reduces() {
		if k.op, err = c.checkOp(a.op); err != nil {
			return err
		}
	}
	if coll.Rooted() {
		if err := c.checkRoot(a.root); err != nil {
			return err
		}
		k.root = a.root
	}
	switch {
	case a.v && coll == sched.AllToAll:
		err = c.checkAllToAllV(a, k)
	case a.v:
		err = c.checkV(a, k)
	default:
		err = c.checkUniform(a, k)
	}
	if err == nil && coll.Reduces() {
		k.avg = k.out
	}
	return err
}

func (c *Comm) checkUniform(a *args, k *call) error {
	l := layouts[a.coll]
	es := k.dt.Size()
	block, other, bname, oname := a.send, a.recv, "send", "recv"
	if !l.blockIsSend {
		block, other, bname, oname = a.recv, a.send, "recv", "send"
	}
	if l.single {
		bname = "buf"
	}
	n, err := c.checkLen(bname, block, es)
	if err != nil {
		return err
	}
	k.count = n
	if l.divisible {
		if n%c.size != 0 {
			return invalid("len(%s) = %d elements, not a multiple of Size() = %d", bname, n, c.size)
		}
		k.count = n / c.size
	}
	k.digest = int64(k.count)
	if l.single {
		k.out = block
		return nil
	}
	if l.rootOnly && c.rank != a.root {
		other = nil
	} else {
		want, times, where := n, "", ""
		if l.wide {
			want, times = c.size*n, "Size() × "
		}
		if l.rootOnly {
			where = " at the root"
		}
		if len(other) != want*es {
			return invalid("len(%s) = %d elements%s, want %slen(%s) = %d", oname, len(other)/es, where, times, bname, want)
		}
		off := 0
		switch l.at {
		case atRank:
			off = c.rank * len(block)
		case atRoot:
			off = a.root * len(block)
		}
		if k.inPlace, err = inPlace(block, other, off); err != nil {
			return err
		}
	}
	k.in, k.out = block, other
	if !l.blockIsSend {
		k.in, k.out = other, block
	}
	return nil
}

// checkV checks AllGatherV and ReduceScatterV: this rank's block holds
// counts[Rank()] elements, the other buffer sum(counts).
func (c *Comm) checkV(a *args, k *call) error {
	total, err := c.checkCounts("counts", a.counts)
	if err != nil {
		return err
	}
	es := k.dt.Size()
	block, other, bname, oname := a.send, a.recv, "send", "recv"
	if a.coll == sched.ReduceScatter {
		block, other, bname, oname = a.recv, a.send, "recv", "send"
	}
	if len(block) != a.counts[c.rank]*es {
		return invalid("len(%s) = %d elements, want counts[%d] = %d", bname, len(block)/es, c.rank, a.counts[c.rank])
	}
	if len(other) != total*es {
		return invalid("len(%s) = %d elements, want sum(counts) = %d", oname, len(other)/es, total)
	}
	spec := &sched.Spec{Coll: a.coll, N: c.size, Counts: a.counts}
	if spec.InPlace, err = inPlace(block, other, spec.Displ(c.rank)*es); err != nil {
		return err
	}
	k.spec, k.in, k.out, k.digest = spec, a.send, a.recv, digestCounts(a.counts)
	return nil
}

func (c *Comm) checkAllToAllV(a *args, k *call) error {
	sendCounts, recvCounts := a.counts, a.recvCounts
	st, err := c.checkCounts("sendCounts", sendCounts)
	if err != nil {
		return err
	}
	rt, err := c.checkCounts("recvCounts", recvCounts)
	if err != nil {
		return err
	}
	es := k.dt.Size()
	if len(a.send) != st*es {
		return invalid("len(send) = %d elements, want sum(sendCounts) = %d", len(a.send)/es, st)
	}
	if len(a.recv) != rt*es {
		return invalid("len(recv) = %d elements, want sum(recvCounts) = %d", len(a.recv)/es, rt)
	}
	if sendCounts[c.rank] != recvCounts[c.rank] {
		return invalid("sendCounts[%d] = %d but recvCounts[%d] = %d: a rank's block to itself must match",
			c.rank, sendCounts[c.rank], c.rank, recvCounts[c.rank])
	}
	ip, err := inPlace(a.send, a.recv, 0)
	if err != nil {
		return err
	}
	if ip {
		for i := range sendCounts {
			if sendCounts[i] != recvCounts[i] {
				return invalid("in place needs sendCounts == recvCounts (differ at %d)", i)
			}
		}
	}
	// A rank knows its own row and column of the count matrix; the
	// algorithms read nothing else.
	m := make([][]int, c.size)
	for i := range m {
		m[i] = make([]int, c.size)
		m[i][c.rank] = recvCounts[i]
	}
	copy(m[c.rank], sendCounts)
	if ip {
		// The spec of an in-place call claims a symmetric matrix; this
		// rank's row and column are equal, the rest is unknown and unused.
		for i := range m {
			m[c.rank][i], m[i][c.rank] = sendCounts[i], sendCounts[i]
		}
	}
	k.spec = &sched.Spec{Coll: sched.AllToAll, N: c.size, Matrix: m, InPlace: ip}
	k.in, k.out, k.digest = a.send, a.recv, -1
	return nil
}
