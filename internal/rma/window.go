// Package rma implements hcomm's one-sided windows: memory every rank
// exposes to the others, which they write (Put), read (Get) and signal
// (PutSignal) without the target's code taking part.
//
// # How a rank reaches a peer's window
//
//   - Mapped: windows made by AllocWindow live in a /dev/shm segment of
//     each rank. Ranks of the same memory domain (same kernel boot, network
//     and mount namespace) map each other's segments; a Put is a copy into
//     the mapping, a Get a copy out of it.
//   - Cross-memory: windows made by NewWindow expose ordinary Go memory;
//     local peers move bytes with process_vm_writev/process_vm_readv on the
//     target's pages (one system call for all rows of a strided access).
//     The signals still live in a small mapped segment.
//   - Messages: other peers (other hosts, or when mapping fails) send
//     requests over a transport of the window's own. A progress goroutine
//     per peer on the target receives them, checks every one against the
//     registration (window id, incarnation nonce, bounds, signal index:
//     a request is untrusted input) and applies it; a second goroutine per
//     peer sends the replies, so two ranks that Get from each other never
//     wait on each other's sends. A Put returns once the target has
//     applied it and acknowledged. The pieces of Get replies travel on a
//     transport of their own (Params.Replies, made when some rank uses
//     messages), received by a third goroutine per peer: on one stream a
//     rank's request to a peer waited behind the bytes of its reply to
//     that peer's Get already queued in the sockets, so two ranks getting
//     from each other took turns instead of moving both ways at once.
//
// # Memory ordering
//
// The bytes of a Put by mapping or cross-memory are stored (by a copy or by
// the kernel on the caller's thread) before the call returns. PutSignal
// then performs an atomic add on the target's signal word; Go's atomic
// read-modify-write is sequentially consistent, so it is a release: a
// WaitSignal that loads the new value atomically (an acquire) sees the
// bytes. Over messages the target's progress goroutine receives the bytes
// into the window before its atomic add, with the same argument. The
// futex word (the bell) is incremented after the signal and before the
// wake, and a waiter loads the bell before it re-checks the signal, so a
// waiter either sees the signal or sleeps on a stale bell value and
// returns at once. Fence is a Flush to every peer followed by a barrier of
// the communicator, whose messages are published by the transports'
// atomic stores: everything stored before the barrier on any rank is
// visible on every rank after it.
package rma

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hcomm-go/hcomm/internal/copyeng"
	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/spin"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// NumSignals is the number of signal words of every window on every rank.
const NumSignals = 64

// RecordSize is the size of the record each rank contributes to a window's
// exchange.
const RecordSize = 128

const (
	recMagic   = 0x5245_4357    // "WCER"
	recMachine = RecordSize - 8 // the machine key; the segment name is before it
	kindAlloc  = 1
	kindUser   = 2
)

// Params describe a window being made.
type Params struct {
	Rank, Size int
	ID         uint32              // the window's number, the same on every rank
	T          transport.Transport // the window's message path; the window closes it
	Buf        []byte              // NewWindow: the exposed memory
	Alloc      int                 // AllocWindow: bytes to allocate (Buf must be nil); -1 for NewWindow
	Chunk      int                 // largest payload message; default 1 MiB
	// Exchange gathers every rank's record (RecordSize bytes) in rank order.
	Exchange func(ctx context.Context, rec []byte) ([]byte, error)
	// Barrier returns once every rank has entered it.
	Barrier func(ctx context.Context) error
	// Replies, if set, connects a second transport among the ranks (all
	// of them call it, or none: New decides from what every rank
	// announces), which then carries the pieces of Get replies, so that
	// a rank's requests do not queue behind the bytes of its replies to
	// the same peer. New calls it only when some rank reaches a peer by
	// messages; the window closes what it returns.
	Replies func(ctx context.Context) (transport.Transport, error)
	// Messages forces the message path to every other rank.
	Messages bool
	// Check, if set, reports an error that should end a sleeping
	// WaitSignal (the communicator failed or closed).
	Check func() error
	// Timeout bounds each request on the message path and each
	// WaitSignal that has to sleep (0: only the ctx does).
	Timeout time.Duration
	// Copy, if set, is called once the window knows its local ranks
	// (Local), when some peer is mapped, and returns the function that
	// performs contiguous copies to and from mapped peers (the copy
	// engine's splitter), or nil for the built-in copy.
	Copy func(local int) func(dst, src []byte)
}

// TimeoutError is returned when Params.Timeout (not the caller's ctx)
// ended a wait. It matches context.DeadlineExceeded.
type TimeoutError struct{ After time.Duration }

func (e TimeoutError) Error() string { return fmt.Sprintf("timed out after %v", e.After) }

func (e TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// withTimeout bounds ctx by the window's timeout.
func (w *Window) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if w.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, w.timeout)
}

// ctxErr is ctx's error, as a TimeoutError when the window's timeout (and
// not the parent ctx) ended it.
func (w *Window) ctxErr(parent, ctx context.Context) error {
	if parent.Err() == nil && ctx.Err() == context.DeadlineExceeded {
		return TimeoutError{w.timeout}
	}
	return ctx.Err()
}

// Modes of reaching a peer.
const (
	modeSelf = iota
	modeMapped
	modeCMA
	modeMsg
)

// Window is one rank's handle on a window.
type Window struct {
	rank, size int
	id, nonce  uint32
	t          transport.Transport
	rt         transport.Transport // the reply path (Params.Replies); nil: replies go on t
	chunk      int
	timeout    time.Duration
	alive      func() error
	copyFn     func(dst, src []byte)
	mem        []byte   // this rank's exposed bytes
	seg        *segment // this rank's segment (signals; data for AllocWindow)
	alloc      bool
	peers      []*peer
	fp         wire.Fingerprint

	life    sync.RWMutex // shared by operations, exclusive by Close while it unmaps
	closed  atomic.Bool
	broken  atomic.Pointer[error] // a timed-out request poisoned the window
	spin    atomic.Int64          // how long WaitSignal polls before sleeping (ns)
	local   int                   // ranks of the window on this machine (sharing its CPUs), this one included
	oversub bool                  // they outnumber its CPUs
	workers sync.WaitGroup
}

type peer struct {
	rank  int
	mode  int
	size  int
	nonce uint32
	pid   int
	base  uintptr  // cross-memory: the address of the peer's buffer
	seg   *segment // mapped peer segment (signals, and data when mapped)
	data  []byte   // mapped: the peer's bytes

	lost   atomic.Pointer[error]
	lostCh chan struct{}

	sendMu sync.Mutex // one sender of header+payload sequences at a time
	// sendWait counts requests waiting for sendMu; the replier lets
	// them go between the pieces of a Get's reply.
	sendWait atomic.Int32

	// Up to maxOutstanding requests to the peer may await their replies
	// at once; a request holds a slot from slots until its reply came or
	// it was withdrawn. Request numbers are seq·maxOutstanding + slot.
	slots  chan uint8
	pmu    sync.Mutex // guards pend and reqSeq
	pend   [maxOutstanding]*pending
	pds    [maxOutstanding]pending
	reqSeq uint64

	replies chan reply // to the peer's replier goroutine
	parts   chan reply // Get replies, to the replier on the reply path (nil without one)
}

// maxOutstanding is the number of requests to one peer that may await
// their replies at once.
const maxOutstanding = 16

type pending struct {
	slot     uint8
	req      uint64
	loc      []byte // Get: where the reply's rows go
	locPitch int
	rows, n  int // Get: the rows requested and the bytes of each
	done     chan uint8
}

type reply struct {
	h   header
	src []byte // Get: the window's bytes at the requested offset
}

// New makes a window; every rank of the group calls it.
func New(ctx context.Context, p Params) (*Window, error) {
	w := &Window{
		rank: p.Rank, size: p.Size, id: p.ID, t: p.T, chunk: p.Chunk, timeout: p.Timeout, alive: p.Check,
		nonce: rand.Uint32() | 1, alloc: p.Alloc >= 0,
		fp: wire.Fingerprint{Coll: wire.CollSendRecv, Root: -1 - int32(p.ID%(1<<30))},
	}
	if w.chunk <= 0 {
		w.chunk = 1 << 20
	}
	w.spin.Store(int64(spinMax))
	dataLen := 0
	if w.alloc {
		dataLen = p.Alloc
	}
	seg, err := createSegment(dataLen, w.nonce)
	if err != nil {
		return nil, err
	}
	w.seg = seg
	if w.alloc {
		w.mem = seg.data(dataLen)
	} else {
		w.mem = p.Buf
	}
	fail := func(err error) (*Window, error) {
		for _, q := range w.peers {
			if q != nil && q.seg != nil {
				q.seg.unmap()
			}
		}
		seg.unlink()
		seg.unmap()
		return nil, err
	}

	var rec [RecordSize]byte
	binary.LittleEndian.PutUint32(rec[0:], recMagic)
	binary.LittleEndian.PutUint32(rec[4:], w.nonce)
	binary.LittleEndian.PutUint64(rec[8:], uint64(len(w.mem)))
	binary.LittleEndian.PutUint32(rec[16:], uint32(os.Getpid()))
	rec[20] = kindUser
	if w.alloc {
		rec[20] = kindAlloc
	}
	name := seg.name()
	rec[21] = byte(len(name))
	if len(w.mem) > 0 {
		binary.LittleEndian.PutUint64(rec[24:], uint64(uintptr(unsafe.Pointer(&w.mem[0]))))
	}
	key, machine := hostKey(), machineKey()
	copy(rec[32:64], key[:])
	copy(rec[64:recMachine], name)
	copy(rec[recMachine:], machine[:])
	all, err := p.Exchange(ctx, rec[:])
	if err != nil {
		return fail(err)
	}
	if len(all) != p.Size*RecordSize {
		return fail(fmt.Errorf("window exchange returned %d bytes, want %d", len(all), p.Size*RecordSize))
	}
	w.peers = make([]*peer, p.Size)
	for r := range p.Size {
		q, err := w.newPeer(r, all[r*RecordSize:(r+1)*RecordSize], key, p.Messages)
		if err != nil {
			return fail(fmt.Errorf("rank %d's window record: %w", r, err))
		}
		w.peers[r] = q
		if r == p.Rank || [8]byte(all[r*RecordSize+recMachine:(r+1)*RecordSize]) == machine {
			w.local++
		}
	}
	w.oversub = w.local > runtime.NumCPU()
	for _, q := range w.peers {
		if q.mode == modeMapped && p.Copy != nil {
			w.copyFn = p.Copy(w.local)
			break
		}
	}
	// Everybody has mapped what they could: the names may go. Where a
	// reply path may be made, the ranks say whether they reach a peer by
	// messages in an exchange that is also the barrier.
	if p.Replies == nil {
		if err := p.Barrier(ctx); err != nil {
			return fail(err)
		}
	} else {
		var flag [RecordSize]byte
		for _, q := range w.peers {
			if q.mode == modeMsg {
				flag[0] = 1
			}
		}
		all, err := p.Exchange(ctx, flag[:])
		if err != nil {
			return fail(err)
		}
		if len(all) != p.Size*RecordSize {
			return fail(fmt.Errorf("window exchange returned %d bytes, want %d", len(all), p.Size*RecordSize))
		}
		for r := range p.Size {
			if all[r*RecordSize] != 0 {
				if w.rt, err = p.Replies(ctx); err != nil {
					return fail(fmt.Errorf("the window's reply path: %w", err))
				}
				break
			}
		}
	}
	seg.unlink()
	for _, q := range w.peers {
		if q.rank == w.rank {
			continue
		}
		// Room for a reply to every request the peer may have
		// outstanding, so serve never waits for the replier (which may
		// wait for the peer's serve, which may wait for its replier).
		q.replies = make(chan reply, maxOutstanding)
		w.workers.Add(2)
		if w.rt != nil {
			// Get replies have a replier of their own, on the reply
			// path, so that acknowledgements never wait behind them.
			q.parts = make(chan reply, maxOutstanding)
			w.workers.Add(2)
			go w.serveParts(q)
			go w.replier(q, q.parts)
		}
		go w.serve(q)
		go w.replier(q, q.replies)
	}
	return w, nil
}

// newPeer decodes rank r's record and picks how to reach it.
func (w *Window) newPeer(r int, rec []byte, key [32]byte, messages bool) (*peer, error) {
	q := &peer{rank: r, lostCh: make(chan struct{}), mode: modeMsg, slots: make(chan uint8, maxOutstanding)}
	for i := range maxOutstanding {
		q.pds[i] = pending{slot: uint8(i), done: make(chan uint8, 1)}
		q.slots <- uint8(i)
	}
	if binary.LittleEndian.Uint32(rec[0:]) != recMagic {
		return nil, errors.New("bad magic")
	}
	q.nonce = binary.LittleEndian.Uint32(rec[4:])
	size := binary.LittleEndian.Uint64(rec[8:])
	if size > maxPayload {
		return nil, fmt.Errorf("size %d too large", size)
	}
	q.size = int(size)
	q.pid = int(binary.LittleEndian.Uint32(rec[16:]))
	kind := rec[20]
	if (kind == kindAlloc) != w.alloc || (kind != kindAlloc && kind != kindUser) {
		return nil, errors.New("ranks disagree about the kind of window")
	}
	if rec[21] > recMachine-64 {
		return nil, errors.New("bad segment name length")
	}
	name := string(rec[64 : 64+int(rec[21])])
	q.base = uintptr(binary.LittleEndian.Uint64(rec[24:]))
	if r == w.rank {
		q.mode = modeSelf
		return q, nil
	}
	if messages || !haveSegments || [32]byte(rec[32:64]) != key {
		return q, nil
	}
	dataLen := 0
	if w.alloc {
		dataLen = q.size
	}
	s, err := openSegment(name, dataLen, q.nonce)
	if err != nil {
		return q, nil // reach it by messages
	}
	if w.alloc {
		q.seg, q.data, q.mode = s, s.data(q.size), modeMapped
		return q, nil
	}
	if err := cmaProbe(q.pid, q.base, q.size); err != nil {
		s.unmap()
		return q, nil
	}
	q.seg, q.mode = s, modeCMA
	return q, nil
}

// Size returns the bytes rank exposes, or 0 for a rank out of range.
func (w *Window) Size(rank int) int {
	if rank < 0 || rank >= w.size {
		return 0
	}
	return w.peers[rank].size
}

// Bytes returns this rank's exposed memory.
func (w *Window) Bytes() []byte { return w.mem }

// Local returns the number of the window's ranks on this machine (the
// same kernel, whatever their network namespace), this rank included:
// the ranks that share its CPUs.
func (w *Window) Local() int { return w.local }

// ID returns the window's number.
func (w *Window) ID() uint32 { return w.id }

// Mode names how this rank reaches rank r: "self", "mapped",
// "cross-memory" or "messages".
func (w *Window) Mode(r int) string {
	return [...]string{"self", "mapped", "cross-memory", "messages"}[w.peers[r].mode]
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errs.ErrInvalidArgument}, args...)...)
}

// Shape is a strided access: Rows rows of Len bytes; the rows are Pitch
// bytes apart in the window and LocalPitch apart in the local buffer.
// Rows 0 or 1 is a contiguous access of Len bytes.
type Shape struct {
	Rows, Len, Pitch, LocalPitch int
}

// check validates an access and returns the target's peer.
func (w *Window) check(target, off int, loc []byte, s *Shape) (*peer, error) {
	if target < 0 || target >= w.size {
		return nil, invalid("window %d: target %d outside [0, %d)", w.id, target, w.size)
	}
	q := w.peers[target]
	rows := max(s.Rows, 1)
	if s.Rows < 0 || !copyeng.InBounds(off, rows, s.Len, s.Pitch, q.size) {
		if rows == 1 {
			return nil, invalid("window %d: target %d offset %d length %d outside its %d bytes", w.id, target, off, s.Len, q.size)
		}
		return nil, invalid("window %d: target %d offset %d, %d rows of %d bytes at pitch %d, outside its %d bytes",
			w.id, target, off, rows, s.Len, s.Pitch, q.size)
	}
	if !copyeng.InBounds(0, rows, s.Len, s.LocalPitch, len(loc)) {
		return nil, invalid("window %d: local buffer of %d bytes too short for %d rows of %d bytes at pitch %d",
			w.id, len(loc), rows, s.Len, s.LocalPitch)
	}
	return q, w.usable(q)
}

// usable returns why operations on q cannot run, or nil.
func (w *Window) usable(q *peer) error {
	if w.closed.Load() {
		return fmt.Errorf("window %d: %w", w.id, errs.ErrClosed)
	}
	if e := w.broken.Load(); e != nil {
		return fmt.Errorf("window %d unusable after an earlier failure: %w: %w", w.id, errs.ErrAborted, *e)
	}
	if q != nil {
		if e := q.lost.Load(); e != nil {
			return *e
		}
	}
	return nil
}

// Put writes the rows of src described by s to target's window at off.
func (w *Window) Put(ctx context.Context, target, off int, src []byte, s Shape) error {
	return w.put(ctx, target, off, src, s, -1, 0)
}

// PutSignal is Put followed by an atomic add of add to target's signal sig,
// ordered after the bytes.
func (w *Window) PutSignal(ctx context.Context, target, off int, src []byte, s Shape, sig int, add uint64) error {
	if sig < 0 || sig >= NumSignals {
		return invalid("window %d: signal %d outside [0, %d)", w.id, sig, NumSignals)
	}
	return w.put(ctx, target, off, src, s, sig, add)
}

func (w *Window) put(ctx context.Context, target, off int, src []byte, s Shape, sig int, add uint64) error {
	q, err := w.check(target, off, src, &s)
	if err != nil {
		return err
	}
	w.life.RLock()
	defer w.life.RUnlock()
	if err := w.usable(q); err != nil {
		return err
	}
	rows := max(s.Rows, 1)
	switch q.mode {
	case modeSelf:
		copyRows(w.mem, off, s.Pitch, src, 0, s.LocalPitch, rows, s.Len)
		if sig >= 0 {
			signal(w.seg, sig, add)
		}
		return nil
	case modeMapped:
		if rows == 1 && w.copyFn != nil {
			w.copyFn(q.data[off:off+s.Len], src[:s.Len])
		} else {
			copyRows(q.data, off, s.Pitch, src, 0, s.LocalPitch, rows, s.Len)
		}
		if sig >= 0 {
			signal(q.seg, sig, add)
		}
		return nil
	case modeCMA:
		if err := w.cma(q, true, src, off, &s); err != nil {
			return err
		}
		if sig >= 0 {
			signal(q.seg, sig, add)
		}
		return nil
	}
	h := header{op: opPut, win: w.id, nonce: q.nonce, off: uint64(off), n: uint64(s.Len), pitch: uint64(s.Pitch)}
	if s.Rows > 1 {
		h.rows = uint32(s.Rows)
	}
	if sig >= 0 {
		h.op, h.sig, h.add = opPutSignal, uint32(sig), add
	}
	return w.request(ctx, q, &h, src, s.LocalPitch)
}

// Get reads the rows described by s from target's window at off into dst.
func (w *Window) Get(ctx context.Context, target, off int, dst []byte, s Shape) error {
	q, err := w.check(target, off, dst, &s)
	if err != nil {
		return err
	}
	w.life.RLock()
	defer w.life.RUnlock()
	if err := w.usable(q); err != nil {
		return err
	}
	rows := max(s.Rows, 1)
	switch q.mode {
	case modeSelf:
		copyRows(dst, 0, s.LocalPitch, w.mem, off, s.Pitch, rows, s.Len)
		return nil
	case modeMapped:
		if rows == 1 && w.copyFn != nil {
			w.copyFn(dst[:s.Len], q.data[off:off+s.Len])
			return nil
		}
		copyRows(dst, 0, s.LocalPitch, q.data, off, s.Pitch, rows, s.Len)
		return nil
	case modeCMA:
		return w.cma(q, false, dst, off, &s)
	}
	h := header{op: opGet, win: w.id, nonce: q.nonce, off: uint64(off), n: uint64(s.Len), pitch: uint64(s.Pitch)}
	if s.Rows > 1 {
		h.rows = uint32(s.Rows)
	}
	return w.request(ctx, q, &h, dst, s.LocalPitch)
}

// copyRows copies rows rows of n bytes; the caller has checked the bounds.
func copyRows(dst []byte, doff, dpitch int, src []byte, soff, spitch, rows, n int) {
	if n == 0 {
		return
	}
	for r := range rows {
		d, s := doff+r*dpitch, soff+r*spitch
		copy(dst[d:d+n], src[s:s+n])
	}
}

func (w *Window) cma(q *peer, write bool, loc []byte, off int, s *Shape) error {
	err := cmaRows(q.pid, write, loc, s.LocalPitch, q.base, off, s.Rows, s.Len, s.Pitch)
	if err == nil {
		return nil
	}
	if errors.Is(err, errProcessGone) || !pidAlive(q.pid) {
		return w.lose(q, &errs.PeerError{Peer: q.rank, Kind: errs.ErrPeerLost, Cause: errors.New("process exited")})
	}
	return fmt.Errorf("window %d: cross-memory access to rank %d: %w", w.id, q.rank, err)
}

// signal adds add to signal sig of the segment and wakes its waiters.
func signal(s *segment, sig int, add uint64) {
	if raceEnabled {
		raceMu.Lock()
		defer raceMu.Unlock()
	}
	atomic.AddUint64(&s.sigs()[sig], add)
	atomic.AddUint32(s.u32(bellOff), 1)
	if atomic.LoadUint32(s.u32(waitersOff)) > 0 {
		futexWakeAll(s.u32(bellOff))
	}
}

// Flush returns once every earlier Put to target (-1: every rank) is
// visible there. Puts complete before they return (copies, system calls,
// or acknowledged requests), so Flush only reports whether the targets
// are still reachable.
func (w *Window) Flush(ctx context.Context, target int) error {
	if target < -1 || target >= w.size {
		return invalid("window %d: target %d outside [-1, %d)", w.id, target, w.size)
	}
	if target >= 0 {
		return w.usable(w.peers[target])
	}
	for _, q := range w.peers {
		if err := w.usable(q); err != nil {
			return err
		}
	}
	raceSync()
	return ctx.Err()
}

// Signal returns the current value of this rank's signal sig.
func (w *Window) Signal(sig int) uint64 {
	return loadSignal(&w.seg.sigs()[sig])
}

// raceMu gives the race detector the happens-before edge that the atomic
// signal words in mapped memory (which it does not watch) provide.
var raceMu sync.Mutex

// raceSync marks, for the race detector, a point where causality runs
// through another process (a request and the peer's reaction to it).
func raceSync() {
	if raceEnabled {
		raceMu.Lock()
		raceMu.Unlock() //nolint:staticcheck // an empty critical section is the point
	}
}

func loadSignal(p *uint64) uint64 {
	if raceEnabled {
		raceMu.Lock()
		defer raceMu.Unlock()
	}
	return atomic.LoadUint64(p)
}

// WaitSignal waits until this rank's signal sig is at least atLeast and
// returns its value. It polls briefly, then sleeps on the bell.
func (w *Window) WaitSignal(ctx context.Context, sig int, atLeast uint64) (uint64, error) {
	if sig < 0 || sig >= NumSignals {
		return 0, invalid("window %d: signal %d outside [0, %d)", w.id, sig, NumSignals)
	}
	w.life.RLock()
	defer w.life.RUnlock()
	if err := w.usable(nil); err != nil {
		return 0, err
	}
	word := &w.seg.sigs()[sig]
	// Spin for an adaptive time (see spinMin): a wait the spin satisfied
	// lengthens the next spin.
	budget := time.Duration(w.spin.Load())
	var start time.Time
	var done <-chan struct{}
	for i := 0; ; i++ {
		if v := loadSignal(word); v >= atLeast {
			if budget < spinMax {
				w.spin.Store(int64(grow(budget)))
			}
			return v, nil
		}
		if i%256 == 255 {
			// The clock and the context are read only once the signal
			// is late: most come within the first loads (a clock read
			// costs as much as the signal's trip between the CPUs).
			if start.IsZero() {
				start, done = time.Now(), ctx.Done()
			} else if d := time.Since(start); d >= budget {
				break
			} else if d > pollFor || w.oversub {
				spin.YieldCPU()
			}
			select {
			case <-done:
				// Cancelled while spinning: as prompt as a sleeper.
				w.spin.Store(int64(spinMin))
				return loadSignal(word), ctx.Err()
			default:
			}
			runtime.Gosched()
		}
	}
	// The spin missed. Whether a longer one would have caught the signal
	// is known only once it arrives: if it comes within spinWorth of
	// here, the peer was running (or waking) and the spin was merely
	// short: lengthen it, or a peer that answers only after waking from
	// its own futex sleep keeps finding this rank asleep too, and every
	// message pays a wake-up on each side for good. If later, or never,
	// the peer was descheduled: back to the token spin.
	slept := time.Now()
	v, err := w.sleepSignal(ctx, word, atLeast)
	if err == nil && time.Since(slept) < spinWorth {
		w.spin.Store(int64(grow(budget)))
	} else {
		w.spin.Store(int64(spinMin))
	}
	return v, err
}

// WaitSignal's spin, in time, before it sleeps on the bell: between
// spinMin and spinMax, starting at spinMax.
//
//   - The longest spin must outlast a futex wake-up of the peer (about
//     27 µs on this project's VM), or two ranks signalling each other
//     settle into waking each other from sleep every time. The spin used
//     to count loads, at most 4096 (about 10 µs): shorter than a wake-up,
//     which is how some idle runs settled at 5–13 µs per 8 B PutSignal
//     exchange while others stayed at 0.6 µs.
//   - After pollFor the spin yields the CPU to other processes between
//     polls (from the start when the ranks of this machine outnumber its
//     CPUs): on a loaded machine the peer may be waiting for this very
//     CPU, and a spinner that keeps it also uses up its own share of CPU
//     time, so the scheduler then keeps it off the CPU longer.
//   - A wait that slept long resets the spin to spinMin; waits that pay
//     lengthen it slowly (grow). On a loaded machine, where long misses
//     come every few dozen waits, the spin stays short; on a quiet one
//     it stays at spinMax.
const (
	spinMin = 2 * time.Microsecond
	spinMax = 200 * time.Microsecond
)

// grow lengthens a spin that paid (or would have): slowly, by 1/16, so
// that it reaches spinMax only after dozens of waits without a long miss
// (about 75 from spinMin).
func grow(budget time.Duration) time.Duration { return min(budget+budget/16, spinMax) }

// pollFor is how long WaitSignal polls before it yields the CPU to other
// processes between polls.
const pollFor = 4 * time.Microsecond

// spinWorth is how soon after a missed spin a signal must come for a
// longer spin to have been worth it (a var for tests).
var spinWorth = 100 * time.Microsecond

// sleepSignal waits on the bell until the signal is at least atLeast.
func (w *Window) sleepSignal(ctx context.Context, word *uint64, atLeast uint64) (uint64, error) {
	var until time.Time // the window's timeout, without a context per sleep
	if w.timeout > 0 {
		until = time.Now().Add(w.timeout)
	}
	bell, waiters := w.seg.u32(bellOff), w.seg.u32(waitersOff)
	for {
		b := atomic.LoadUint32(bell)
		if v := loadSignal(word); v >= atLeast {
			return v, nil
		}
		if err := ctx.Err(); err != nil {
			return atomic.LoadUint64(word), err
		}
		d := 20 * time.Millisecond
		if !until.IsZero() {
			left := time.Until(until)
			if left <= 0 {
				return atomic.LoadUint64(word), TimeoutError{w.timeout}
			}
			d = min(d, left)
		}
		if err := w.usable(nil); err != nil {
			return 0, err
		}
		if w.alive != nil {
			if err := w.alive(); err != nil {
				return 0, err
			}
		}
		if dl, ok := ctx.Deadline(); ok {
			d = min(d, max(time.Until(dl), time.Microsecond))
		}
		atomic.AddUint32(waiters, 1)
		if atomic.LoadUint64(word) < atLeast {
			futexSleep(bell, b, d)
		}
		atomic.AddUint32(waiters, ^uint32(0))
	}
}

// Close releases the window. The caller has made sure no peer accesses it
// any more (a barrier); operations still running fail.
func (w *Window) Close() error {
	if w.closed.Swap(true) {
		return fmt.Errorf("window %d: %w", w.id, errs.ErrClosed)
	}
	futexWakeAll(w.seg.u32(bellOff))
	err := w.t.Close()
	if w.rt != nil {
		if e := w.rt.Close(); err == nil {
			err = e
		}
	}
	w.workers.Wait()
	w.life.Lock()
	defer w.life.Unlock()
	for _, q := range w.peers {
		if q.seg != nil {
			q.seg.unmap()
		}
	}
	w.seg.unmap()
	return err
}

// lose records that q is gone and returns err.
func (w *Window) lose(q *peer, err error) error {
	if q.lost.CompareAndSwap(nil, &err) {
		close(q.lostCh)
	}
	return *q.lost.Load()
}

// poison makes the window unusable after a request whose reply can no
// longer be awaited safely.
func (w *Window) poison(err error) {
	if w.broken.CompareAndSwap(nil, &err) {
		w.t.Abort(err)
		if w.rt != nil {
			w.rt.Abort(err)
		}
	}
}

// Synced is called after a barrier that orders accesses of other
// processes; it tells the race detector.
func (w *Window) Synced() { raceSync() }

// Closed reports whether Close was called.
func (w *Window) Closed() bool { return w.closed.Load() }
