// Package sched defines the schedule IR: a collective algorithm is a pure
// function that returns, for one rank, a Program — a sequence of Steps, each a
// set of Ops over named buffer regions. Programs contain no pointers and do no
// I/O, so they can be printed, compared in golden files, verified
// symbolically (Verify) and executed for real (internal/exec).
//
// Units are elements, never bytes: the same program serves every data type.
//
// Execution model (the contract between algorithms, the verifier and the
// executor):
//
//   - A rank executes its steps in order. Step k+1 starts only after every op
//     of step k has completed.
//   - The ops of one step run concurrently. They must not write overlapping
//     regions, and no op may read a region another op of the same step
//     writes (Verify checks this). Within one step a rank has at most one
//     op sending to any given peer and at most one op receiving from any
//     given peer, so that messages on a channel have a defined order.
//   - Messages between an ordered pair of ranks are matched in order: the
//     k-th message rank a sends to rank b is the k-th message b receives from
//     a. Matched messages have equal lengths (Verify checks this).
//   - Sends may be rendezvous: a send is allowed to complete only once the
//     receiver has posted the matching receive. A program that is free of
//     deadlock under that model is free of deadlock under any buffering.
//   - The forwarding ops (RecvReduceSend, RecvCopySend) send data derived
//     from what they receive; the executor may pipeline them chunk by chunk.
//   - Zero-length messages are real messages (a barrier is made of them).
package sched

import "fmt"

// Buf names one of the three buffers a rank works on.
type Buf uint8

const (
	// In is the caller's send buffer. Programs never write it.
	In Buf = iota
	// Out is the caller's receive buffer.
	Out
	// Scratch is a temporary buffer of Program.Scratch elements owned by the
	// executor.
	Scratch
)

func (b Buf) String() string {
	switch b {
	case In:
		return "in"
	case Out:
		return "out"
	case Scratch:
		return "scratch"
	}
	return fmt.Sprintf("buf(%d)", uint8(b))
}

// Region is a contiguous range of elements of one buffer.
type Region struct {
	Buf Buf
	Off int
	Len int
}

// R is shorthand for Region{b, off, n}.
func R(b Buf, off, n int) Region { return Region{Buf: b, Off: off, Len: n} }

func (r Region) String() string { return fmt.Sprintf("%s[%d:+%d]", r.Buf, r.Off, r.Len) }

// End returns Off+Len.
func (r Region) End() int { return r.Off + r.Len }

// Kind is the kind of an Op.
type Kind uint8

const (
	// Send sends Src to Peer.
	Send Kind = iota + 1
	// Recv receives a message from Peer into Dst.
	Recv
	// RecvReduce receives a message from Peer and stores Src ⊕ message in
	// Dst. Src and Dst may be the same region.
	RecvReduce
	// RecvReduceSend is RecvReduce followed by sending Dst to To.
	RecvReduceSend
	// RecvCopySend receives a message from Peer into Dst and forwards it to To.
	RecvCopySend
	// Copy copies Src to Dst (equal lengths, not overlapping unless equal).
	Copy
	// LocalReduce stores Dst ⊕ Src in Dst.
	LocalReduce
)

var kindNames = [...]string{Send: "send", Recv: "recv", RecvReduce: "recv-reduce",
	RecvReduceSend: "recv-reduce-send", RecvCopySend: "recv-copy-send", Copy: "copy", LocalReduce: "reduce"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Op is one fused primitive. Which fields matter depends on Kind:
//
//	Send            Peer, Src
//	Recv            Peer, Dst
//	RecvReduce      Peer, Src, Dst
//	RecvReduceSend  Peer, To, Src, Dst
//	RecvCopySend    Peer, To, Dst
//	Copy            Src, Dst
//	LocalReduce     Src, Dst
//
// All regions of one op have the same length.
type Op struct {
	Kind Kind
	Peer int // the rank sent to (Send) or received from (all receiving kinds)
	To   int // the rank forwarded to (RecvReduceSend, RecvCopySend)
	Src  Region
	Dst  Region
}

// Len returns the number of elements the op moves.
func (o Op) Len() int {
	if o.Kind == Send {
		return o.Src.Len
	}
	return o.Dst.Len
}

// Sends reports whether the op sends a message, and to whom.
func (o Op) Sends() (peer int, ok bool) {
	switch o.Kind {
	case Send:
		return o.Peer, true
	case RecvReduceSend, RecvCopySend:
		return o.To, true
	}
	return 0, false
}

// Receives reports whether the op receives a message, and from whom.
func (o Op) Receives() (peer int, ok bool) {
	switch o.Kind {
	case Recv, RecvReduce, RecvReduceSend, RecvCopySend:
		return o.Peer, true
	}
	return 0, false
}

// Step is a set of ops that run concurrently.
type Step struct {
	Ops []Op
}

// Program is what one rank executes for one collective.
type Program struct {
	Rank    int
	Size    int
	Algo    string // e.g. "ring", "rd", "hd", "tree"; informational
	Scratch int    // elements of scratch space needed
	Steps   []Step
}

// Builder appends steps to a Program. The zero value is not usable; use
// NewBuilder.
type Builder struct {
	p *Program
}

// NewBuilder starts a program for rank of size ranks.
func NewBuilder(algo string, rank, size int) *Builder {
	return &Builder{p: &Program{Rank: rank, Size: size, Algo: algo}}
}

// Step appends one step made of ops. Empty steps are dropped.
func (b *Builder) Step(ops ...Op) *Builder {
	if len(ops) > 0 {
		b.p.Steps = append(b.p.Steps, Step{Ops: ops})
	}
	return b
}

// NeedScratch records that the program uses at least n scratch elements.
func (b *Builder) NeedScratch(n int) *Builder {
	if n > b.p.Scratch {
		b.p.Scratch = n
	}
	return b
}

// Program returns the program built so far.
func (b *Builder) Program() *Program { return b.p }

// Op constructors.

// SendOp sends src to peer.
func SendOp(peer int, src Region) Op { return Op{Kind: Send, Peer: peer, Src: src} }

// RecvOp receives from peer into dst.
func RecvOp(peer int, dst Region) Op { return Op{Kind: Recv, Peer: peer, Dst: dst} }

// RecvReduceOp receives from peer and stores src ⊕ message in dst.
func RecvReduceOp(peer int, src, dst Region) Op {
	return Op{Kind: RecvReduce, Peer: peer, Src: src, Dst: dst}
}

// RecvReduceSendOp receives from peer, stores src ⊕ message in dst and sends dst to to.
func RecvReduceSendOp(peer, to int, src, dst Region) Op {
	return Op{Kind: RecvReduceSend, Peer: peer, To: to, Src: src, Dst: dst}
}

// RecvCopySendOp receives from peer into dst and forwards it to to.
func RecvCopySendOp(peer, to int, dst Region) Op {
	return Op{Kind: RecvCopySend, Peer: peer, To: to, Dst: dst}
}

// CopyOp copies src to dst.
func CopyOp(src, dst Region) Op { return Op{Kind: Copy, Src: src, Dst: dst} }

// ReduceOp stores dst ⊕ src in dst.
func ReduceOp(src, dst Region) Op { return Op{Kind: LocalReduce, Src: src, Dst: dst} }

// Block returns the offset and length of block b when count elements are
// split into n nearly equal contiguous blocks: the first count%n blocks hold
// one element more than the others.
func Block(count, n, b int) (off, length int) {
	q, r := count/n, count%n
	if b < r {
		return b * (q + 1), q + 1
	}
	return r*(q+1) + (b-r)*q, q
}
