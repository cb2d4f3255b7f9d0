// Package argcheck holds the one description of a call as the user made it
// (Args) and the one argument checker over it (Check, CheckP2P), shared by
// the synchronous, Bytes and Async forms of every operation.
//
// The checker is pure: it sees the communicator only as its rank and size,
// sends nothing, and allocates nothing except for AllToAllV, whose count
// matrix it builds. A call that fails it gets an error wrapping
// errs.ErrInvalidArgument and leaves the communicator untouched.
package argcheck

import (
	"hash/fnv"
	"math"
	"math/bits"
	"unsafe"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
)

// Args is one call as the user made it: the arguments of its Bytes form.
// DT and Op are the public DType and Op values, unchecked.
type Args struct {
	Coll       sched.Coll // sched.SendRecv for Send and Recv
	V          bool       // the V form: counts given (AllGatherV, ReduceScatterV, AllToAllV)
	RecvSide   bool       // Recv rather than Send
	Send, Recv []byte     // Broadcast's and Recv's buffer is Recv, Send's is Send
	DT         int
	Op         int
	Root       int // the root, or the peer of Send and Recv
	Tag        int
	Counts     []int // counts, or AllToAllV's sendCounts
	RecvCounts []int // AllToAllV's recvCounts
}

// Name is the operation's name as the user called it.
func (a *Args) Name() string {
	switch {
	case a.Coll == sched.SendRecv && a.RecvSide:
		return "Recv"
	case a.Coll == sched.SendRecv:
		return "Send"
	case a.V:
		return vNames[a.Coll]
	}
	return a.Coll.String()
}

// Buf is a Send's or Recv's buffer: Recv for a Recv, else Send.
func (a *Args) Buf() []byte {
	if a.RecvSide {
		return a.Recv
	}
	return a.Send
}

var vNames = [...]string{sched.AllGather: "AllGatherV", sched.ReduceScatter: "ReduceScatterV", sched.AllToAll: "AllToAllV"}

// Call is a collective's call after checking. A uniform call (every rank
// the same count) names its count, root and in-place-ness; the V forms
// carry a full Spec.
type Call struct {
	Count   int // per-rank count of a uniform call
	Root    int
	InPlace bool
	Spec    *sched.Spec // nil for uniform calls
	DT      reduce.DType
	Op      reduce.Op
	In, Out []byte
	Avg     []byte // the part of Out to divide by Size for Avg (nil: none)
	Digest  int64  // Fingerprint.Count
}

// MaxElems bounds the elements of one buffer so that a count times the
// largest element size (8 bytes) still fits an int.
const MaxElems = math.MaxInt / 8

// layout describes the buffers of a collective whose ranks all pass the
// same count: the block buffer holds this rank's count elements; the other
// holds one block, or size of them (wide).
type layout struct {
	blockIsSend bool // the block is Send (else Recv)
	single      bool // one buffer only (Broadcast's buf)
	wide        bool // the other buffer holds size blocks
	rootOnly    bool // the other buffer matters only at the root
	at          int  // in place, the block sits at: atStart, atRank or atRoot of the other
	divisible   bool // the block holds size per-rank blocks (AllToAll)
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

// checker is the communicator as the checks see it.
type checker struct{ rank, size int }

// Check checks a collective's arguments (not Barrier's, Send's or Recv's)
// at rank of size ranks and describes the call to run in k, which must be
// zero.
func Check(a *Args, rank, size int, k *Call) error {
	c := checker{rank, size}
	coll := a.Coll
	d, err := DType(a.DT)
	if err != nil {
		return err
	}
	k.DT = d
	if coll.Reduces() {
		if k.Op, err = Op(a.Op); err != nil {
			return err
		}
	}
	if coll.Rooted() {
		if a.Root < 0 || a.Root >= size {
			return errs.Invalid("root %d outside [0, %d)", a.Root, size)
		}
		k.Root = a.Root
	}
	switch {
	case a.V && coll == sched.AllToAll:
		err = c.allToAllV(a, k)
	case a.V:
		err = c.v(a, k)
	default:
		err = c.uniform(a, k)
	}
	if err == nil && coll.Reduces() {
		k.Avg = k.Out
	}
	return err
}

// DType checks a public DType value.
func DType(dt int) (reduce.DType, error) {
	if dt < 0 || dt > 255 || !reduce.DType(dt).Valid() {
		return 0, errs.Invalid("unknown dtype DType(%d)", dt)
	}
	return reduce.DType(dt), nil
}

// Op checks a public Op value.
func Op(op int) (reduce.Op, error) {
	if op < 0 || op > 255 || !reduce.Op(op).Valid() {
		return 0, errs.Invalid("unknown reduction op Op(%d)", op)
	}
	return reduce.Op(op), nil
}

// CheckP2P checks the arguments of a Send or Recv of buf at rank of size
// ranks and returns the element type and count.
func CheckP2P(buf []byte, dt, peer, tag, rank, size int) (reduce.DType, int, error) {
	d, err := DType(dt)
	if err != nil {
		return 0, 0, err
	}
	if peer < 0 || peer >= size || peer == rank {
		return 0, 0, errs.Invalid("peer %d: want a rank in [0, %d) other than this one (%d)", peer, size, rank)
	}
	if tag < 0 || tag > 1<<31-1 {
		return 0, 0, errs.Invalid("tag %d outside [0, 2^31)", tag)
	}
	n, err := elems("buf", buf, d.Size())
	if err != nil {
		return 0, 0, err
	}
	return d, n, nil
}

func (c checker) uniform(a *Args, k *Call) error {
	l := layouts[a.Coll]
	es := k.DT.Size()
	block, other, bname, oname := a.Send, a.Recv, "send", "recv"
	if !l.blockIsSend {
		block, other, bname, oname = a.Recv, a.Send, "recv", "send"
	}
	if l.single {
		bname = "buf"
	}
	n, err := elems(bname, block, es)
	if err != nil {
		return err
	}
	k.Count = n
	if l.divisible {
		if n%c.size != 0 {
			return errs.Invalid("len(%s) = %d elements, not a multiple of Size() = %d", bname, n, c.size)
		}
		k.Count = n / c.size
	}
	k.Digest = int64(k.Count)
	if l.single {
		k.Out = block
		return nil
	}
	if !l.rootOnly || c.rank == a.Root {
		want, times, where := n, "", ""
		if l.wide {
			want, times = c.size*n, "Size() × "
		}
		if l.rootOnly {
			where = " at the root"
		}
		if len(other) != want*es {
			return errs.Invalid("len(%s) = %d elements%s, want %slen(%s) = %d", oname, len(other)/es, where, times, bname, want)
		}
	}
	return c.place(a, k)
}

// place describes the buffers of a uniform call whose lengths are right:
// which is the input and which the output, and whether the call is in
// place (or its buffers overlap wrongly).
func (c checker) place(a *Args, k *Call) error {
	l := &layouts[a.Coll]
	block, other := a.Send, a.Recv
	if !l.blockIsSend {
		block, other = a.Recv, a.Send
	}
	if l.single {
		k.Out = block
		return nil
	}
	if l.rootOnly && c.rank != a.Root {
		other = nil
	} else {
		off := 0
		switch l.at {
		case atRank:
			off = c.rank * len(block)
		case atRoot:
			off = a.Root * len(block)
		}
		var err error
		if k.InPlace, err = InPlace(block, other, off); err != nil {
			return err
		}
	}
	k.In, k.Out = block, other
	if !l.blockIsSend {
		k.In, k.Out = other, block
	}
	return nil
}

// Memo is Check with a memory of the last uniform call it passed: a call
// of the same shape (collective, element type, op, root and buffer
// lengths) at the same rank and size is checked only for what can differ
// between such calls, where its buffers lie (their overlap). That keeps a
// small collective's argument check to a few comparisons. The zero Memo
// is empty; a Memo is not safe for concurrent use.
type Memo struct {
	ok           bool
	coll         sched.Coll
	dt, op, root int
	send, recv   int // buffer lengths
	rank, size   int
	k            Call // Count, Root, DT, Op and Digest of the call
}

// Check is Check(a, rank, size, k), served from the memo when a has the
// shape of the last uniform call that passed.
func (m *Memo) Check(a *Args, rank, size int, k *Call) error {
	if !m.ok || a.Coll != m.coll || a.V || a.DT != m.dt || a.Op != m.op || a.Root != m.root ||
		len(a.Send) != m.send || len(a.Recv) != m.recv || rank != m.rank || size != m.size {
		if err := Check(a, rank, size, k); err != nil {
			return err
		}
		if !a.V {
			*m = Memo{ok: true, coll: a.Coll, dt: a.DT, op: a.Op, root: a.Root, send: len(a.Send), recv: len(a.Recv),
				rank: rank, size: size, k: Call{Count: k.Count, Root: k.Root, DT: k.DT, Op: k.Op, Digest: k.Digest}}
		}
		return nil
	}
	k.Count, k.Root, k.DT, k.Op, k.Digest = m.k.Count, m.k.Root, m.k.DT, m.k.Op, m.k.Digest
	if err := (checker{rank, size}).place(a, k); err != nil {
		return err
	}
	if a.Coll.Reduces() {
		k.Avg = k.Out
	}
	return nil
}

// v checks AllGatherV and ReduceScatterV: this rank's block holds
// counts[rank] elements, the other buffer sum(counts).
func (c checker) v(a *Args, k *Call) error {
	total, err := c.counts("counts", a.Counts)
	if err != nil {
		return err
	}
	es := k.DT.Size()
	block, other, bname, oname := a.Send, a.Recv, "send", "recv"
	if a.Coll == sched.ReduceScatter {
		block, other, bname, oname = a.Recv, a.Send, "recv", "send"
	}
	if len(block) != a.Counts[c.rank]*es {
		return errs.Invalid("len(%s) = %d elements, want counts[%d] = %d", bname, len(block)/es, c.rank, a.Counts[c.rank])
	}
	if len(other) != total*es {
		return errs.Invalid("len(%s) = %d elements, want sum(counts) = %d", oname, len(other)/es, total)
	}
	spec := &sched.Spec{Coll: a.Coll, N: c.size, Counts: a.Counts}
	if spec.InPlace, err = InPlace(block, other, spec.Displ(c.rank)*es); err != nil {
		return err
	}
	k.Spec, k.In, k.Out, k.Digest = spec, a.Send, a.Recv, DigestCounts(a.Counts)
	return nil
}

func (c checker) allToAllV(a *Args, k *Call) error {
	sendCounts, recvCounts := a.Counts, a.RecvCounts
	st, err := c.counts("sendCounts", sendCounts)
	if err != nil {
		return err
	}
	rt, err := c.counts("recvCounts", recvCounts)
	if err != nil {
		return err
	}
	es := k.DT.Size()
	if len(a.Send) != st*es {
		return errs.Invalid("len(send) = %d elements, want sum(sendCounts) = %d", len(a.Send)/es, st)
	}
	if len(a.Recv) != rt*es {
		return errs.Invalid("len(recv) = %d elements, want sum(recvCounts) = %d", len(a.Recv)/es, rt)
	}
	if sendCounts[c.rank] != recvCounts[c.rank] {
		return errs.Invalid("sendCounts[%d] = %d but recvCounts[%d] = %d: a rank's block to itself must match",
			c.rank, sendCounts[c.rank], c.rank, recvCounts[c.rank])
	}
	ip, err := InPlace(a.Send, a.Recv, 0)
	if err != nil {
		return err
	}
	if ip {
		for i := range sendCounts {
			if sendCounts[i] != recvCounts[i] {
				return errs.Invalid("in place needs sendCounts == recvCounts (differ at %d)", i)
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
	k.Spec = &sched.Spec{Coll: sched.AllToAll, N: c.size, Matrix: m, InPlace: ip}
	k.In, k.Out, k.Digest = a.Send, a.Recv, -1
	return nil
}

// elems returns the elements of es bytes in b. Element sizes are powers
// of two: a mask and a shift, not a division, on every call.
func elems(name string, b []byte, es int) (int, error) {
	if es <= 0 || es&(es-1) != 0 || len(b)&(es-1) != 0 {
		return 0, errs.Invalid("len(%s) = %d bytes, not a multiple of the element size %d", name, len(b), es)
	}
	return len(b) >> bits.TrailingZeros(uint(es)), nil
}

func (c checker) counts(name string, counts []int) (total int, err error) {
	if len(counts) != c.size {
		return 0, errs.Invalid("len(%s) = %d, want Size() = %d", name, len(counts), c.size)
	}
	for i, n := range counts {
		if n < 0 {
			return 0, errs.Invalid("%s[%d] = %d is negative", name, i, n)
		}
		if n > MaxElems-total {
			return 0, errs.Invalid("sum(%s) overflows at %s[%d] = %d", name, name, i, n)
		}
		total += n
	}
	return total, nil
}

// DigestCounts is the fingerprint count of a V call: a hash of its counts.
func DigestCounts(counts []int) int64 {
	h := fnv.New64a()
	var b [8]byte
	for _, n := range counts {
		for i := range b {
			b[i] = byte(uint64(n) >> (8 * i))
		}
		h.Write(b[:])
	}
	return int64(h.Sum64() >> 1)
}

// SameStart reports whether a and b start at the same address (both
// non-empty).
func SameStart(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// overlap reports whether a and b share any byte.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// InPlace decides whether small is exactly big[off:off+len(small)] (in
// place), disjoint from big (out of place), or overlaps it some other way
// (an error).
func InPlace(small, big []byte, off int) (bool, error) {
	if !overlap(small, big) {
		return false, nil
	}
	if off >= 0 && off+len(small) <= len(big) && SameStart(small, big[off:]) {
		return true, nil
	}
	return false, errs.Invalid("send and recv overlap but not in the in-place layout")
}
