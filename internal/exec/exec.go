// Package exec runs schedule programs over a transport.
//
// An Executor belongs to one rank of one communicator and runs one program
// at a time. The ops of a step run concurrently (the first on the calling
// goroutine, the others on the executor's worker goroutines, which persist
// between calls). Every message is cut into chunks of at most ChunkBytes; the
// chunking depends only on the message length and ChunkBytes, so both ends
// agree on it. A forwarding op (recv-reduce-send, recv-copy-send) passes
// chunk i on before receiving chunk i+1, which pipelines chains and rings.
//
// A receive-reduce op whose message comes in several chunks over a
// transport that lands messages whole (TCP) receives chunk i+1 into a
// second staging buffer, on a reader goroutine, while it reduces chunk i.
//
// When an op fails, the executor calls OnError at once (which is expected
// to abort the transport, so that the step's other ops and the peers stop
// waiting) and Run returns that first error.
package exec

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// DefaultChunkBytes is the chunk size used when none is configured.
const DefaultChunkBytes = 1 << 20

// Executor runs programs for one rank.
type Executor struct {
	t     transport.Transport
	chunk int // bytes

	scratch []byte
	staging [][]byte // one per concurrently running op

	workers []chan task
	results chan error
	cur     run // the state of the Run in progress, reused
	wg      sync.WaitGroup
	closed  bool

	eager transport.Eager        // t, if it can tell whether a send completes at once
	sinkR transport.SinkReceiver // t, if it can reduce straight from its buffers
	sinkP transport.SinkPeers    // t, if only some peers' messages reach sinks straight
	sinks []reduceSink           // one per concurrently running op
	exch  transport.Exchanger    // t, if it can run a PairExchange fused
	sinkS transport.SinkSender   // t, if it hands a sent message's pieces to a sink
	sr    transport.SendReceiver // t, if it moves a send and a receive on one goroutine
	xs    exchSink               // the fused exchange's arithmetic, reused
	xMin  int                    // exchangeMin; tests lower it
	pMin  int                    // pairMin; tests lower it
	cMin  int                    // copySendMin; tests lower it

	// For receive-reduce ops over peers without sinks: a second staging
	// buffer and a reader goroutine per concurrently running op, made on
	// first use.
	staging2 [][]byte
	readers  []*reader

	// Timed, if set, makes Run note when the first message from a peer
	// arrived (FirstRecv). It costs a clock read per Run.
	Timed bool
	base  time.Time // FirstRecv's origin
	first int64     // FirstRecv of the last Run: nanoseconds since base + 1, 0 if none

	// OnError, if set, is called once per failed Run with the first error,
	// from whichever goroutine found it, before Run returns. It must make
	// the transport's pending calls return (typically by aborting it).
	OnError func(error)

	// testHookOverlap, if set, is called in a step whose local ops run
	// beside its messages, after dispatched ops went to workers and
	// before the local ops run.
	testHookOverlap func(dispatched int)
	overlapProcs    int // overlapProcs; tests lower it

	// Pin, if set, is called first on every worker goroutine the executor
	// starts, before the Run that starts it goes on: the workers are the
	// goroutines that poll the transport, and Pin may lock them to
	// threads on chosen CPUs (topo.Pin). Set it before the first Run.
	Pin func()
}

type task struct {
	ctx  context.Context
	r    *run
	op   *sched.Op
	slot int // which staging buffers, sink and reader the op uses
}

// A reader receives chunks for a receive-reduce op ahead of its
// reductions. Requests are handed over unbuffered; every request is
// answered on done.
type reader struct {
	req  chan readReq
	done chan error
}

type readReq struct {
	ctx  context.Context
	peer int
	fp   *wire.Fingerprint
	buf  []byte
}

// reduceSink reduces a message into dst as the transport hands it over:
// dst = src ⊕ message, piece by piece. With copy set it copies instead
// (dst = message). With stream set dst is part of a region of at least
// reduce.StreamMin bytes that nothing reads before the op ends, and is
// written around the caches: the transport's pieces are small (a ring
// slot), but the region they fill is not.
type reduceSink struct {
	dt       reduce.DType
	op       reduce.Op
	dst, src []byte
	staging  []byte
	copy     bool
	stream   bool
}

func (s *reduceSink) Consume(off int, b []byte) {
	d := s.dst[off : off+len(b)]
	switch {
	case s.copy && len(b) > 0 && &d[0] == &b[0]:
		// Landed in place (Staging is dst).
	case s.copy:
		copyTo(d, b, s.stream)
	case s.stream:
		reduce.ApplyStream(s.dt, s.op, d, s.src[off:off+len(b)], b)
	default:
		reduce.Apply(s.dt, s.op, d, s.src[off:off+len(b)], b)
	}
}

func (s *reduceSink) Staging() []byte {
	if s.copy {
		return s.dst
	}
	return s.staging
}

// run is the state of one Run call shared by its ops.
type run struct {
	e       *Executor
	failed  atomic.Bool
	err     error // the first error; read after every op has reported
	fp      *wire.Fingerprint
	dt      reduce.DType
	op      reduce.Op
	es      int
	in, out []byte
	scratch []byte
	timed   bool
	// In the current step: a Send whose source a Copy of the step also
	// reads, and that Copy's destination, which the send fills from the
	// transport's copy of each piece (copySend).
	cpSend *sched.Op
	cpDst  []byte
	first  atomic.Int64 // when the first message arrived (Executor.first's unit), if timed
}

// received notes, in a timed run, that a message arrived.
func (r *run) received() {
	if r.timed && r.first.Load() == 0 {
		r.first.CompareAndSwap(0, int64(time.Since(r.e.base))+1)
	}
}

// New returns an executor over t cutting messages into chunks of chunkBytes
// (DefaultChunkBytes if <= 0).
func New(t transport.Transport, chunkBytes int) *Executor {
	if chunkBytes <= 0 {
		chunkBytes = DefaultChunkBytes
	}
	// Chunks hold whole elements of every type.
	chunkBytes = max(8, chunkBytes&^7)
	e := &Executor{t: t, chunk: chunkBytes, base: time.Now(), overlapProcs: overlapProcs}
	e.eager, _ = t.(transport.Eager)
	e.sinkR, _ = t.(transport.SinkReceiver)
	e.sinkP, _ = t.(transport.SinkPeers)
	e.exch, _ = t.(transport.Exchanger)
	e.sinkS, _ = t.(transport.SinkSender)
	e.sr, _ = t.(transport.SendReceiver)
	e.xMin, e.pMin, e.cMin = exchangeMin, pairMin, copySendMin
	return e
}

// ChunkBytes returns the chunk size.
func (e *Executor) ChunkBytes() int { return e.chunk }

// Close stops the worker goroutines. It must not be called while Run is
// running.
func (e *Executor) Close() {
	if e.closed {
		return
	}
	e.closed = true
	for _, w := range e.workers {
		close(w)
	}
	for _, rd := range e.readers {
		if rd != nil {
			close(rd.req)
		}
	}
	e.wg.Wait()
}

func (e *Executor) ensure(nops int, scratchBytes int) {
	for len(e.staging) < nops {
		e.staging = append(e.staging, make([]byte, e.chunk))
	}
	for len(e.sinks) < nops {
		e.sinks = append(e.sinks, reduceSink{})
	}
	for len(e.workers) < nops-1 {
		ch := make(chan task)
		e.workers = append(e.workers, ch)
		e.wg.Add(1)
		pinned := make(chan struct{})
		go e.work(ch, pinned)
		if e.Pin != nil {
			// Pinned before the first Run that needs it returns.
			<-pinned
		}
	}
	if cap(e.scratch) < scratchBytes {
		e.scratch = make([]byte, scratchBytes)
	}
	if cap(e.results) < nops {
		e.results = make(chan error, nops)
	}
	for len(e.staging2) < nops {
		e.staging2 = append(e.staging2, nil)
		e.readers = append(e.readers, nil)
	}
}

// readerFor returns slot's reader and second staging buffer, starting the
// reader on first use.
func (e *Executor) readerFor(slot int) (*reader, []byte) {
	if e.readers[slot] == nil {
		rd := &reader{req: make(chan readReq), done: make(chan error, 1)}
		e.readers[slot] = rd
		e.staging2[slot] = make([]byte, e.chunk)
		e.wg.Add(1)
		go e.read(rd)
	}
	return e.readers[slot], e.staging2[slot]
}

func (e *Executor) read(rd *reader) {
	defer e.wg.Done()
	for q := range rd.req {
		rd.done <- e.t.Recv(q.ctx, q.peer, q.fp, q.buf)
	}
}

func (e *Executor) work(ch chan task, pinned chan<- struct{}) {
	defer e.wg.Done()
	if e.Pin != nil {
		e.Pin()
	}
	close(pinned)
	for t := range ch {
		err := e.runOp(t.ctx, t.r, t.op, t.slot)
		if err != nil {
			t.r.setErr(err)
		}
		e.results <- err
	}
}

// Run executes prog with the given buffers: in and out are the caller's send
// and receive buffers as byte slices (already aliased if the call is in
// place); dt and op say how to reduce; fp is stamped on every message.
func (e *Executor) Run(ctx context.Context, prog *sched.Program, fp *wire.Fingerprint,
	dt reduce.DType, op reduce.Op, in, out []byte) error {
	es := dt.Size()
	maxOps := 1
	for i := range prog.Steps {
		if n := len(prog.Steps[i].Ops); n > maxOps {
			maxOps = n
		}
	}
	if e.closed {
		return fmt.Errorf("exec: executor closed")
	}
	e.ensure(maxOps, prog.Scratch*es)
	r := &e.cur
	*r = run{e: e, fp: fp, dt: dt, op: op, es: es, in: in, out: out, scratch: e.scratch[:prog.Scratch*es], timed: e.Timed}
	defer func() {
		e.first = r.first.Load()
		*r = run{} // drop references to the caller's buffers
	}()
	for si := 0; si < len(prog.Steps); si++ {
		if ok, err := e.exchange(ctx, r, prog, si); ok {
			if err != nil {
				r.setErr(err)
				return r.err
			}
			si++ // the next step ran fused with this one
			continue
		}
		ops := prog.Steps[si].Ops
		// Local ops, and small sends the transport can complete at once,
		// are done here; of the ops that may wait on a peer, the last runs
		// on this goroutine and the others on workers. Ops of a step do not
		// conflict (the verifier proves it), so their order is free, and a
		// send finished early is just a send that completed quickly.
		//
		// Large local ops (an AllGather's own block, say) would delay the
		// step's messages by a pass over memory: then every op that may
		// wait on a peer goes to a worker first, and the local ops run
		// here while the messages move. The step has at least one local
		// op, so there are workers enough. It takes a CPU for each: with
		// fewer than overlapProcs the copy would only take turns with the
		// messages' copies.
		cs, cc := e.copySend(ops, es)
		local := localBytes(ops, es)
		r.cpSend, r.cpDst = nil, nil
		if cs >= 0 {
			r.cpSend, r.cpDst = &ops[cs], r.region(ops[cc].Dst)
			local -= len(r.cpDst)
		}
		if ok, err := e.pairStep(ctx, r, ops, cs, cc); ok {
			if err != nil {
				r.setErr(err)
				return r.err
			}
			continue
		}
		overlap := local >= overlapMin && runtime.GOMAXPROCS(0) >= e.overlapProcs
		inline, dispatched := -1, 0
		for i := range ops {
			op := &ops[i]
			switch {
			case i == cc:
				// Done by the send.
				continue
			case op.Kind == sched.Copy || op.Kind == sched.LocalReduce:
				if overlap {
					continue
				}
				if err := e.runOp(ctx, r, op, -1); err != nil {
					r.setErr(err)
				}
				continue
			case e.eager != nil && op.Kind == sched.Send && op.Src.Len*es <= e.chunk && i != cs:
				ok, err := e.eager.TrySend(ctx, op.Peer, fp, r.region(op.Src))
				if err != nil {
					r.setErr(err)
				}
				if ok || err != nil {
					continue
				}
			}
			if overlap {
				e.workers[dispatched] <- task{ctx: ctx, r: r, op: op, slot: dispatched + 1}
				dispatched++
				continue
			}
			if inline >= 0 {
				e.workers[dispatched] <- task{ctx: ctx, r: r, op: &ops[inline], slot: dispatched + 1}
				dispatched++
			}
			inline = i
		}
		if overlap {
			if e.testHookOverlap != nil {
				e.testHookOverlap(dispatched)
			}
			for i := range ops {
				if k := ops[i].Kind; (k == sched.Copy || k == sched.LocalReduce) && i != cc {
					if err := e.runOp(ctx, r, &ops[i], -1); err != nil {
						r.setErr(err)
					}
				}
			}
		}
		if inline >= 0 && !r.failed.Load() {
			if err := e.runOp(ctx, r, &ops[inline], 0); err != nil {
				r.setErr(err)
			}
		}
		for i := 0; i < dispatched; i++ {
			<-e.results
		}
		if r.failed.Load() {
			return r.err
		}
	}
	return nil
}

// copySendMin is the size (bytes) from which a step's Copy whose source
// the step also sends is done by the send, from the transport's copy of
// each piece (transport.SinkSender), so the source is read from memory
// once: an AllGather's own block. Below it the block is in the caches
// and the copy measured faster on its own (2-rank AllGather 1–4 MiB
// 1.13–1.51× slower with it).
const copySendMin = reduce.StreamMin

// copySend returns the indices of a Send and a Copy of ops with the same
// source of at least copySendMin bytes, when the transport hands sent
// pieces to sinks, or -1, -1.
func (e *Executor) copySend(ops []sched.Op, es int) (send, cp int) {
	if e.sinkS == nil {
		return -1, -1
	}
	for i := range ops {
		if ops[i].Kind != sched.Copy || ops[i].Src.Len*es < e.cMin || ops[i].Src == ops[i].Dst {
			continue
		}
		for j := range ops {
			if ops[j].Kind == sched.Send && ops[j].Src == ops[i].Src {
				return j, i
			}
		}
	}
	return -1, -1
}

// pairMin is the size (bytes) of the larger message of a step of one
// Send and one Recv with the same peer from which pairStep moves both on
// one goroutine. Below it the step measured faster on two (2-rank
// AllReduce 2–4 MiB 1.16–1.19× slower on one, under load): the messages
// are a chunk or a few, and the receive starts when its first slot lands.
const pairMin = reduce.StreamMin

// pairStep runs a step made of a Send to and a Recv from one peer (and
// the copy riding the send, cc, if any) on this goroutine, a ring slot
// of each in turn (transport.SendReceiver), when the larger message is
// at least pairMin bytes; it reports whether it did. Two goroutines
// would each wait for the other's CPU on a host with a CPU per rank.
func (e *Executor) pairStep(ctx context.Context, r *run, ops []sched.Op, cs, cc int) (bool, error) {
	if e.sr == nil || len(ops) != 2+min(cc+1, 1) {
		return false, nil
	}
	var snd, rcv *sched.Op
	for i := range ops {
		switch {
		case i == cc:
		case ops[i].Kind == sched.Send:
			snd = &ops[i]
		case ops[i].Kind == sched.Recv:
			rcv = &ops[i]
		}
	}
	if snd == nil || rcv == nil || snd.Peer != rcv.Peer {
		return false, nil
	}
	a, c := r.region(snd.Src), r.region(rcv.Dst)
	if max(len(a), len(c)) < e.pMin {
		return false, nil
	}
	na, nc := e.chunks(len(a)), e.chunks(len(c))
	stream := len(c) >= reduce.StreamMin
	rsnk, ssnk := &e.sinks[0], &e.sinks[1]
	defer func() { *rsnk, *ssnk = reduceSink{}, reduceSink{} }()
	for i := range max(na, nc) {
		var ps transport.Sink
		if i < na && snd == r.cpSend {
			*ssnk = reduceSink{dst: e.piece(r.cpDst, i), copy: true, stream: len(r.cpDst) >= reduce.StreamMin}
			ps = ssnk
		}
		var err error
		switch {
		case i < na && i < nc:
			d := e.piece(c, i)
			*rsnk = reduceSink{dst: d, copy: true, stream: stream}
			var ok bool
			ok, err = e.sr.SendRecv(ctx, snd.Peer, r.fp, e.piece(a, i), ps, len(d), rsnk)
			if !ok && err == nil {
				if i == 0 {
					return false, nil
				}
				err = fmt.Errorf("exec: the transport cannot move piece %d of a send and receive it moved piece 0 of", i)
			}
			if err == nil {
				r.received()
			}
		case i < na && ps != nil:
			err = e.sinkS.SendSink(ctx, snd.Peer, r.fp, e.piece(a, i), ps)
		case i < na:
			err = e.t.Send(ctx, snd.Peer, r.fp, e.piece(a, i))
		default:
			d := e.piece(c, i)
			*rsnk = reduceSink{dst: d, copy: true, stream: stream}
			if e.sinkR != nil {
				err = e.sinkR.RecvSink(ctx, rcv.Peer, r.fp, len(d), rsnk)
			} else {
				err = e.t.Recv(ctx, rcv.Peer, r.fp, d)
			}
		}
		if err != nil {
			return true, err
		}
	}
	return true, nil
}

// exchangeMin is the size (bytes) of the larger message of a
// sched.PairExchange from which it runs fused over a transport that can
// (transport.Exchanger). Both ends decide alike: the larger message is
// the same pair of lengths seen from either end.
const exchangeMin = reduce.StreamMin

// exchange runs steps si and si+1 of prog as one fused exchange if they
// form a sched.PairExchange, the messages are large enough and the
// transport reaches the peer that way; it reports whether it did.
func (e *Executor) exchange(ctx context.Context, r *run, prog *sched.Program, si int) (bool, error) {
	if e.exch == nil {
		return false, nil
	}
	q, ok := sched.PairExchange(prog, si)
	if !ok {
		return false, nil
	}
	s1, s2 := prog.Steps[si].Ops, prog.Steps[si+1].Ops
	snd, rr, rcv := &s1[0], &s1[1], &s2[1]
	if snd.Kind != sched.Send {
		snd, rr = rr, snd
	}
	if rcv.Kind != sched.Recv {
		rcv = &s2[0]
	}
	a, b, d, c := r.region(snd.Src), r.region(rr.Src), r.region(rr.Dst), r.region(rcv.Dst)
	if max(len(a), len(d)) < e.xMin || !e.exch.ExchangesWith(q) {
		return false, nil
	}
	// The fused run writes piece j of c after reading piece j of a and
	// before reading piece j+1 of b; in-place forms alias at equal
	// offsets (PairExchange), which is safe.
	if len(c) > 0 && ((len(a) > 0 && &a[0] != &c[0] && overlaps(a, c)) || overlaps(b, c)) {
		return false, nil
	}
	e.xs = exchSink{dt: r.dt, op: r.op, src: b, dst: d, recv: c,
		stream: len(d) >= reduce.StreamMin, streamRecv: len(c) >= reduce.StreamMin}
	err := e.exch.Exchange(ctx, q, r.fp, a, len(d), &e.xs)
	e.xs = exchSink{}
	if err == nil {
		r.received()
	}
	return true, err
}

// overlaps reports whether a and b share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// exchSink is a fused exchange's arithmetic (transport.ExchangeSink):
// dst = src ⊕ the peer's first message, written both into the piece sent
// back and into dst; the peer's reduced message lands in recv. Large
// destinations are written around the caches, as a receive's are.
type exchSink struct {
	dt                 reduce.DType
	op                 reduce.Op
	src, dst, recv     []byte
	stream, streamRecv bool
}

func (s *exchSink) Reduce(off int, out, in []byte) {
	reduce.Apply(s.dt, s.op, out, s.src[off:off+len(in)], in)
	copyTo(s.dst[off:off+len(out)], out, s.stream)
}

func (s *exchSink) Land(off int, b []byte) {
	copyTo(s.recv[off:off+len(b)], b, s.streamRecv)
}

// copyTo copies b into d, around the caches when stream (a destination
// too large to stay in them).
func copyTo(d, b []byte, stream bool) {
	if stream {
		reduce.CopyStream(d, b)
	} else {
		copy(d, b)
	}
}

// setErr records the first error of a run and reports it.
func (r *run) setErr(err error) {
	if r.failed.CompareAndSwap(false, true) {
		r.err = err
		if r.e.OnError != nil {
			r.e.OnError(err)
		}
	}
}

func (r *run) region(g sched.Region) []byte {
	var b []byte
	switch g.Buf {
	case sched.In:
		b = r.in
	case sched.Out:
		b = r.out
	default:
		b = r.scratch
	}
	return b[g.Off*r.es : (g.Off+g.Len)*r.es]
}

// chunks returns the number of chunks a message of n bytes is cut into
// (at least one: zero-length messages are real).
func (e *Executor) chunks(n int) int {
	if n <= e.chunk {
		return 1
	}
	return (n + e.chunk - 1) / e.chunk
}

// Transfer sends buf to peer (send) or receives it from peer, cut into
// chunks by the same rule as a program's messages, each stamped with fp.
// It is point-to-point traffic outside any program: unlike Run it may run
// concurrently with Run and with other Transfers (of other peers or
// directions).
func (e *Executor) Transfer(ctx context.Context, peer int, fp *wire.Fingerprint, buf []byte, send bool) error {
	for i, n := 0, e.chunks(len(buf)); i < n; i++ {
		var err error
		if send {
			err = e.t.Send(ctx, peer, fp, e.piece(buf, i))
		} else {
			err = e.t.Recv(ctx, peer, fp, e.piece(buf, i))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (e *Executor) piece(b []byte, i int) []byte {
	lo := i * e.chunk
	hi := min(lo+e.chunk, len(b))
	return b[lo:hi]
}

// overlapMin is the size (bytes) of a step's local ops from which they
// run beside its messages instead of before them: below it, handing the
// messages to workers costs more than the copy.
const overlapMin = 512 << 10

// overlapProcs is the GOMAXPROCS from which large local ops overlap the
// messages: a copy, a send and a receive at once.
const overlapProcs = 3

// OverlapMin and OverlapProcs are the rule above for other packages
// (internal/sim models it): a step's local ops run beside its messages
// when they write at least OverlapMin bytes and GOMAXPROCS is at least
// OverlapProcs.
const (
	OverlapMin   = overlapMin
	OverlapProcs = overlapProcs
)

// localBytes is how many bytes the local ops of a step write.
func localBytes(ops []sched.Op, es int) int {
	n := 0
	for i := range ops {
		if k := ops[i].Kind; k == sched.Copy || k == sched.LocalReduce {
			n += ops[i].Dst.Len * es
		}
	}
	return n
}

// sinksTo reports whether receives from peer can go to a sink straight
// from the transport's buffers.
func (e *Executor) sinksTo(peer int) bool {
	return e.sinkR != nil && (e.sinkP == nil || e.sinkP.SinksTo(peer))
}

// runOp runs one op; slot (-1 for local ops) names the staging buffers,
// sink and reader it may use.
func (e *Executor) runOp(ctx context.Context, r *run, op *sched.Op, slot int) error {
	t := e.t
	var staging []byte
	var snk *reduceSink
	if slot >= 0 {
		staging, snk = e.staging[slot], &e.sinks[slot]
	}
	switch op.Kind {
	case sched.Send:
		src := r.region(op.Src)
		if op == r.cpSend {
			// The step's copy of src rides along: each piece is copied
			// on from the transport's copy, warm in the cache.
			stream := len(r.cpDst) >= reduce.StreamMin
			for i, n := 0, e.chunks(len(src)); i < n; i++ {
				*snk = reduceSink{dst: e.piece(r.cpDst, i), copy: true, stream: stream}
				err := e.sinkS.SendSink(ctx, op.Peer, r.fp, e.piece(src, i), snk)
				*snk = reduceSink{}
				if err != nil {
					return err
				}
			}
			return nil
		}
		for i, n := 0, e.chunks(len(src)); i < n; i++ {
			if err := t.Send(ctx, op.Peer, r.fp, e.piece(src, i)); err != nil {
				return err
			}
		}
	case sched.Recv:
		dst := r.region(op.Dst)
		stream := e.sinkR != nil && len(dst) >= reduce.StreamMin
		for i, n := 0, e.chunks(len(dst)); i < n; i++ {
			var err error
			if stream {
				// A large message lands around the caches.
				d := e.piece(dst, i)
				*snk = reduceSink{dst: d, copy: true, stream: true}
				err = e.sinkR.RecvSink(ctx, op.Peer, r.fp, len(d), snk)
				*snk = reduceSink{}
			} else {
				err = t.Recv(ctx, op.Peer, r.fp, e.piece(dst, i))
			}
			if err != nil {
				return err
			}
			r.received()
		}
	case sched.RecvCopySend:
		dst := r.region(op.Dst)
		for i, n := 0, e.chunks(len(dst)); i < n; i++ {
			p := e.piece(dst, i)
			if err := t.Recv(ctx, op.Peer, r.fp, p); err != nil {
				return err
			}
			r.received()
			if err := t.Send(ctx, op.To, r.fp, p); err != nil {
				return err
			}
		}
	case sched.RecvReduce, sched.RecvReduceSend:
		src, dst := r.region(op.Src), r.region(op.Dst)
		// A large result that is not sent on at once is written around
		// the caches.
		stream := op.Kind == sched.RecvReduce && len(dst) >= reduce.StreamMin
		if n := e.chunks(len(dst)); n > 1 && !e.sinksTo(op.Peer) {
			return e.recvReduceAhead(ctx, r, op, slot, src, dst, n, stream)
		}
		for i, n := 0, e.chunks(len(dst)); i < n; i++ {
			d := e.piece(dst, i)
			if e.sinkR != nil {
				// Reduce straight from the transport's buffers.
				*snk = reduceSink{dt: r.dt, op: r.op, dst: d, src: e.piece(src, i), staging: staging, stream: stream}
				err := e.sinkR.RecvSink(ctx, op.Peer, r.fp, len(d), snk)
				*snk = reduceSink{}
				if err != nil {
					return err
				}
			} else {
				tmp := staging[:len(d)]
				if err := t.Recv(ctx, op.Peer, r.fp, tmp); err != nil {
					return err
				}
				if stream {
					reduce.ApplyStream(r.dt, r.op, d, e.piece(src, i), tmp)
				} else {
					reduce.Apply(r.dt, r.op, d, e.piece(src, i), tmp)
				}
			}
			r.received()
			if op.Kind == sched.RecvReduceSend {
				if err := t.Send(ctx, op.To, r.fp, d); err != nil {
					return err
				}
			}
		}
	case sched.Copy:
		copy(r.region(op.Dst), r.region(op.Src))
	case sched.LocalReduce:
		d := r.region(op.Dst)
		reduce.Apply(r.dt, r.op, d, d, r.region(op.Src))
	default:
		return fmt.Errorf("exec: unknown op kind %v", op.Kind)
	}
	return nil
}

// recvReduceAhead runs a receive-reduce op of n > 1 chunks over a peer
// whose messages land whole in a staging buffer: the reader receives
// chunk i+1 into one buffer while this goroutine reduces chunk i from the
// other (and, for RecvReduceSend, sends it on).
func (e *Executor) recvReduceAhead(ctx context.Context, r *run, op *sched.Op, slot int, src, dst []byte, n int, stream bool) error {
	rd, second := e.readerFor(slot)
	bufs := [2][]byte{e.staging[slot], second}
	rd.req <- readReq{ctx: ctx, peer: op.Peer, fp: r.fp, buf: bufs[0][:len(e.piece(dst, 0))]}
	for i := 0; i < n; i++ {
		if err := <-rd.done; err != nil {
			return err
		}
		r.received()
		d := e.piece(dst, i)
		tmp := bufs[i%2][:len(d)]
		if i+1 < n {
			rd.req <- readReq{ctx: ctx, peer: op.Peer, fp: r.fp, buf: bufs[(i+1)%2][:len(e.piece(dst, i+1))]}
		}
		if stream {
			reduce.ApplyStream(r.dt, r.op, d, e.piece(src, i), tmp)
		} else {
			reduce.Apply(r.dt, r.op, d, e.piece(src, i), tmp)
		}
		if op.Kind == sched.RecvReduceSend {
			if err := e.t.Send(ctx, op.To, r.fp, d); err != nil {
				if i+1 < n {
					// Fail the run (which aborts the transport) so the
					// receive in flight returns, and wait for it: its
					// buffer is this executor's.
					r.setErr(err)
					<-rd.done
				}
				return err
			}
		}
	}
	return nil
}
