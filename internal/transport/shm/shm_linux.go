package shm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/shmdir"
	"github.com/hcomm-go/hcomm/internal/spin"
	"github.com/hcomm-go/hcomm/internal/storepick"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/wire"
)

var _ transport.Transport = (*Transport)(nil)

// Tuning of waits.
const (
	pollFor       = 2 * time.Microsecond   // polling without yielding
	spinFor       = 10 * time.Microsecond  // polling (with yields after pollFor) before sleeping
	yieldFor      = 50 * time.Microsecond  // polling with sched_yield before sleeping, when oversubscribed
	sleepTick     = 20 * time.Millisecond  // longest futex sleep between checks
	livenessAfter = 100 * time.Millisecond // blocked time before checking the peer process
)

// minCMABytes is the smallest message sent by single copy: anything of
// 128 KiB or less might be a stack variable, and goroutine stacks move.
const minCMABytes = 128<<10 + 1

// Single-copy handshake states (rcCMA).
const (
	cmaIdle     uint32 = iota
	cmaPosted          // sender published a descriptor
	cmaReading         // receiver is reading the sender's memory
	cmaDone            // payload delivered
	cmaSkipped         // receiver rejected the message (mismatch)
	cmaFallback        // receiver cannot read: payload follows in slots
	cmaRevoked         // sender gave up; the descriptor is void
)

var (
	errClosed       = fmt.Errorf("shm transport: %w", errs.ErrClosed)
	errStreamBroken = errors.New("message stream broken by an abandoned transfer or a protocol violation")
	errDeparted     = errors.New("rank closed its transport")
	errGone         = errors.New("process exited")
)

// Transport is the shared-memory transport of one rank. Its methods are
// safe for concurrent use within the limits of transport.Transport.
type Transport struct {
	rank, size int
	me         int // index of rank in local
	local      []int
	peers      []*peer // by global rank; nil for ranks not on this host
	seg        *segment
	log        *slog.Logger

	cmaThreshold   int  // 0: disabled
	oversubscribed bool // more local ranks than CPUs: waits yield the CPU
	spread         bool // a CPU per local rank: a woken rank moves off its waker's CPU (apart_linux.go)
	forceFallback  bool
	cmaWarned      atomic.Bool

	// mu is held shared by every call that touches the segment and
	// exclusively by Close while it unmaps it.
	mu      sync.RWMutex
	closed  atomic.Bool
	aborted atomic.Pointer[abortError]

	grp *group // group calls; nil unless every rank is on this host
}

// abortError is what calls return after a local Abort.
type abortError struct{ cause error }

func (e *abortError) Error() string {
	return fmt.Sprintf("shm transport aborted: %v", e.cause)
}

func (e *abortError) Unwrap() []error { return []error{errs.ErrAborted, e.cause} }

// peer is this rank's view of one other local rank.
type peer struct {
	rank  int
	idx   int // local index
	pid   int
	pidfd int // -1 when unavailable
	state *uint32
	out   ring // this rank → peer
	in    ring // peer → this rank

	iovLocal  [1]unix.Iovec
	iovRemote [1]unix.RemoteIovec
}

// ring is one direction between two local ranks, seen from one end. The
// fields after data belong to whichever goroutine of this process uses
// that end (the sender for out, the receiver for in).
type ring struct {
	head, consWait *uint32
	tail, prodWait *uint32
	cma, broken    *uint32
	entries        []byte // entrySize bytes per position
	data           []byte // slotBytes per position
	slotBytes      int
	slots          uint32

	pos    uint32 // this end's counter: head for out, tail for in
	seen   uint32 // producer: the consumer's counter (tail) as last read
	cmaOff bool   // sender: the peer cannot read us; stream everything
	ts     unix.Timespec
	pfd    [1]unix.PollFd
	warned bool // a protocol violation was logged
	// picks chooses, per exchange size, how the sender writes the slots
	// of a fused exchange (Exchange; storepick).
	picks storepick.Set
}

func (r *ring) slot(i uint32) []byte {
	j := int(i%r.slots) * r.slotBytes
	return r.data[j : j+r.slotBytes : j+r.slotBytes]
}

// entry returns the entry of position i.
func (r *ring) entry(i uint32) []byte {
	j := int(i%r.slots) * entrySize
	return r.entries[j : j+entrySize : j+entrySize]
}

// stamp returns the stamp word of position i's entry.
func (r *ring) stamp(i uint32) *uint32 {
	return (*uint32)(unsafe.Pointer(&r.entries[int(i%r.slots)*entrySize]))
}

// New joins the local ranks of a communicator: the lowest local rank
// creates the shared segment, the others attach to it, and New returns
// once every local rank has attached (or ctx ends).
func New(ctx context.Context, cfg Config) (*Transport, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	t := &Transport{
		rank:          cfg.Rank,
		size:          cfg.Size,
		local:         append([]int(nil), cfg.Local...),
		peers:         make([]*peer, cfg.Size),
		log:           cfg.Logger.With("rank", cfg.Rank),
		cmaThreshold:  max(cfg.CMAThreshold, minCMABytes),
		forceFallback: cfg.forceCMAFallback,
	}
	if cfg.CMAThreshold < 0 {
		t.cmaThreshold = 0
	}
	for i, r := range t.local {
		if r == cfg.Rank {
			t.me = i
		}
	}
	n := len(t.local)
	if n == 1 {
		return t, nil
	}
	t.oversubscribed = cfg.Yield > 0 || (cfg.Yield == 0 && n > runtime.NumCPU())
	t.spread = !t.oversubscribed
	var seg *segment
	var err error
	if t.me == 0 {
		seg, err = createSegment(ctx, &cfg, n)
	} else {
		seg, err = attachSegment(ctx, &cfg, n, t.me)
	}
	if err != nil {
		return nil, fmt.Errorf("shm transport: %w", err)
	}
	node := homeNode()
	if node >= 0 {
		if err := seg.placeIncoming(t.me, node); err != nil {
			t.log.Debug("shm: cannot place the rings on this rank's NUMA node", "node", node, "err", err)
		}
	}
	// Not the rings on a machine of several NUMA nodes: a ring this rank
	// writes is a peer's to place, which moves only pages no one else
	// has mapped.
	if !cfg.noPopulate {
		seg.populate(t.me, n == t.size, node < 0)
	}
	if err := seg.awaitAttached(ctx); err != nil {
		seg.setReason(t.me, "setup failed: "+err.Error())
		atomic.OrUint32(seg.state(t.me), stateAborted)
		futexWakeAll(seg.attached())
		if t.me == 0 {
			_ = seg.unlink()
		}
		seg.unmap()
		return nil, fmt.Errorf("shm transport: %w", err)
	}
	// Everyone has the segment mapped: the name is no longer needed.
	if err := seg.unlink(); err != nil {
		t.log.Warn("shm: cannot unlink segment", "path", seg.path, "err", err)
	}
	t.seg = seg
	if t.cmaThreshold > 0 {
		// Single-copy reads: let the peers (only) read this process's
		// memory where Yama restricts it.
		t.allowPeerReads()
	}
	for j, r := range t.local {
		if j == t.me {
			continue
		}
		p := &peer{rank: r, idx: j, pid: seg.pid(j), pidfd: -1, state: seg.state(j)}
		if fd, err := unix.PidfdOpen(p.pid, 0); err == nil {
			p.pidfd = fd
		}
		p.out = seg.ring(t.me, j)
		p.in = seg.ring(j, t.me)
		t.peers[r] = p
	}
	if n == t.size {
		t.grp = &group{n: n}
	}
	t.log.Debug("shm: transport ready", "local_ranks", n, "slot_bytes", seg.slotBytes,
		"slots", seg.slots, "cma_threshold", t.cmaThreshold)
	return t, nil
}

// normalize checks cfg and fills in defaults.
func (cfg *Config) normalize() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("shm transport: %s: %w", fmt.Sprintf(format, args...), errs.ErrInvalidArgument)
	}
	if cfg.Size <= 0 || cfg.Rank < 0 || cfg.Rank >= cfg.Size {
		return bad("rank %d of %d", cfg.Rank, cfg.Size)
	}
	found := false
	for i, r := range cfg.Local {
		if r < 0 || r >= cfg.Size || (i > 0 && r <= cfg.Local[i-1]) {
			return bad("local ranks %v are not sorted distinct ranks below %d", cfg.Local, cfg.Size)
		}
		found = found || r == cfg.Rank
	}
	if !found {
		return bad("local ranks %v do not include rank %d", cfg.Local, cfg.Rank)
	}
	if len(cfg.Local) > maxLocal {
		return bad("%d local ranks, at most %d supported", len(cfg.Local), maxLocal)
	}
	if len(cfg.Local) > 1 && cfg.KV == nil {
		return bad("no store to exchange the segment name")
	}
	if cfg.SlotBytes == 0 {
		cfg.SlotBytes = DefaultSlotBytes
	}
	if cfg.SlotBytes < pageSize || cfg.SlotBytes > maxSlotBytes {
		return bad("slot size %d out of range [%d, %d]", cfg.SlotBytes, pageSize, maxSlotBytes)
	}
	cfg.SlotBytes = int(roundUp(int64(cfg.SlotBytes), 64))
	if cfg.Slots == 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.Slots < 2 || cfg.Slots > maxSlots {
		return bad("%d slots per ring out of range [2, %d]", cfg.Slots, maxSlots)
	}
	if cfg.CMAThreshold == 0 {
		cfg.CMAThreshold = DefaultCMAThreshold
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// ring returns the view of the ring from local rank i to local rank j.
func (s *segment) ring(i, j int) ring {
	off := s.ringOffset(i, j)
	ents := off + pageSize
	ne := entrySize * s.slots
	data := ents + int(roundUp(int64(ne), pageSize))
	n := s.slotBytes * s.slots
	return ring{
		entries:   s.mem[ents : ents+ne : ents+ne],
		head:      s.u32(off + rcHead),
		consWait:  s.u32(off + rcConsWait),
		tail:      s.u32(off + rcTail),
		prodWait:  s.u32(off + rcProdWait),
		cma:       s.u32(off + rcCMA),
		broken:    s.u32(off + rcBroken),
		data:      s.mem[data : data+n : data+n],
		slotBytes: s.slotBytes,
		slots:     uint32(s.slots),
	}
}

// Rank returns this rank's global rank.
func (t *Transport) Rank() int { return t.rank }

// Size returns the communicator size.
func (t *Transport) Size() int { return t.size }

// begin validates a call and holds t.mu shared; the caller must call
// t.mu.RUnlock when begin succeeds.
func (t *Transport) begin(rank int, fp *wire.Fingerprint) (*peer, error) {
	if rank < 0 || rank >= t.size || t.peers[rank] == nil || fp == nil {
		return nil, t.badPeer(rank, fp)
	}
	t.mu.RLock()
	if t.closed.Load() {
		t.mu.RUnlock()
		return nil, errClosed
	}
	if e := t.aborted.Load(); e != nil {
		t.mu.RUnlock()
		return nil, e
	}
	return t.peers[rank], nil
}

func (t *Transport) badPeer(rank int, fp *wire.Fingerprint) error {
	if fp == nil {
		return fmt.Errorf("shm transport: nil fingerprint: %w", errs.ErrInvalidArgument)
	}
	return fmt.Errorf("shm transport: rank %d is not another rank on this host (local ranks %v): %w",
		rank, t.local, errs.ErrInvalidArgument)
}

// Send delivers fp and p to rank peer. Small messages are copied into the
// ring and Send returns once the last slot is written; large ones wait
// until the receiver has read them.
func (t *Transport) Send(ctx context.Context, rank int, fp *wire.Fingerprint, p []byte) error {
	return t.send(ctx, rank, fp, p, nil)
}

// SendSink is Send that hands s each piece of p right after copying it
// into the ring, from the ring slot (transport.SinkSender); a message sent
// by single copy, or inline in its entry, reaches s whole from p.
func (t *Transport) SendSink(ctx context.Context, rank int, fp *wire.Fingerprint, p []byte, s transport.Sink) error {
	return t.send(ctx, rank, fp, p, s)
}

func (t *Transport) send(ctx context.Context, rank int, fp *wire.Fingerprint, p []byte, s transport.Sink) error {
	pe, err := t.begin(rank, fp)
	if err != nil {
		return err
	}
	defer t.mu.RUnlock()
	r := &pe.out
	if atomic.LoadUint32(r.broken) != 0 {
		return brokenError(pe)
	}
	if err := t.awaitSpace(ctx, pe, r); err != nil {
		return err
	}
	h := msgHeader{kind: kindInline, length: uint64(len(p)), fp: *fp}
	if t.cmaThreshold > 0 && len(p) >= t.cmaThreshold && !r.cmaOff {
		if s != nil {
			s.Consume(0, p)
		}
		return t.sendCMA(ctx, pe, r, &h, p)
	}
	first := r.putFirst(&h, p)
	pos := r.pos
	r.publish()
	if s != nil {
		if len(p) <= inlineMax {
			s.Consume(0, p)
		} else {
			s.Consume(0, r.slot(pos)[:first])
		}
	}
	if err := t.sendStream(ctx, pe, r, p[first:], first, s); err != nil {
		return t.breakRing(r, err)
	}
	return nil
}

// putFirst writes the header of a kindInline message and the part of its
// payload that goes with it at r.pos (all of it up to inlineMax bytes,
// else up to a slot), and returns the length of that part.
func (r *ring) putFirst(h *msgHeader, p []byte) int {
	e := r.entry(r.pos)
	h.encode(e)
	if len(p) <= inlineMax {
		return copy(e[hdrSize:], p)
	}
	return copy(r.slot(r.pos), p)
}

// firstLen is how much of a length-byte kindInline message its first
// position carries.
func (r *ring) firstLen(length uint64) uint64 {
	if length <= inlineMax {
		return length
	}
	return min(length, uint64(r.slotBytes))
}

// TrySend sends p at once if it fits in one ring position (a slot, or the
// entry for up to 64 bytes) and a position is free; otherwise it sends
// nothing and reports false. With GOMAXPROCS 1 and a CPU per local rank
// it also sends a message of several slots when that many are free: the
// caller would otherwise hand it to another goroutine, which with one P
// copies only while the caller's receive yields, using up that receive's
// polling (it then sleeps on its futex and is woken late). Ranks that
// share CPUs yield while they poll instead of sleeping.
func (t *Transport) TrySend(ctx context.Context, rank int, fp *wire.Fingerprint, p []byte) (bool, error) {
	pe, err := t.begin(rank, fp)
	if err != nil {
		return false, err
	}
	defer t.mu.RUnlock()
	r := &pe.out
	if atomic.LoadUint32(r.broken) != 0 {
		return false, brokenError(pe)
	}
	if t.cmaThreshold > 0 && len(p) >= t.cmaThreshold {
		return false, nil
	}
	need := uint32(1)
	if len(p) > r.slotBytes {
		if t.oversubscribed || runtime.GOMAXPROCS(0) > 1 {
			return false, nil
		}
		need = uint32((len(p) + r.slotBytes - 1) / r.slotBytes)
	}
	if r.pos-r.seen+need > r.slots {
		r.seen = atomic.LoadUint32(r.tail)
		if r.pos-r.seen+need > r.slots {
			return false, nil
		}
	}
	h := msgHeader{kind: kindInline, length: uint64(len(p)), fp: *fp}
	first := r.putFirst(&h, p)
	r.publish()
	if first < len(p) {
		// The slots are free: sendStream does not wait.
		if err := t.sendStream(ctx, pe, r, p[first:], first, nil); err != nil {
			return true, t.breakRing(r, err)
		}
	}
	return true, nil
}

// sendStream writes p into whole slots, waiting for room as needed; with
// s set it hands s each slot once published (off: where p starts in the
// message). The producer alone writes its slots, so a published slot
// holds its bytes until this end reuses it.
func (t *Transport) sendStream(ctx context.Context, pe *peer, r *ring, p []byte, off int, s transport.Sink) error {
	for len(p) > 0 {
		if err := t.awaitSpace(ctx, pe, r); err != nil {
			return err
		}
		slot := r.slot(r.pos)
		n := copy(slot, p)
		(&msgHeader{}).encode(r.entry(r.pos)) // kind 0: a continuation
		r.publish()
		if s != nil {
			s.Consume(off, slot[:n])
		}
		p = p[n:]
		off += n
	}
	return nil
}

// sendCMA posts a descriptor of p and waits until the receiver has read
// it, skipped it, or asked for the payload through the ring. The caller
// has made room for one slot.
func (t *Transport) sendCMA(ctx context.Context, pe *peer, r *ring, h *msgHeader, p []byte) error {
	h.kind = kindCMA
	h.addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p))))
	h.encode(r.entry(r.pos))
	atomic.StoreUint32(r.cma, cmaPosted)
	r.publish()
	target := r.pos
	state := uint32(cmaIdle)
	for {
		tl := atomic.LoadUint32(r.tail)
		if tl == target {
			state = atomic.LoadUint32(r.cma)
			break
		}
		if tl-target+r.slots > r.slots {
			// The consumer is not between its old position and target.
			runtime.KeepAlive(p)
			return t.protocolError(pe, r, fmt.Errorf("tail %d beyond head %d", tl, target))
		}
		err := t.await(ctx, pe, r, r.tail, tl, r.tail, tl, r.prodWait)
		if err == nil {
			continue
		}
		// Give up unless the receiver already finished with p.
		if atomic.CompareAndSwapUint32(r.cma, cmaPosted, cmaRevoked) ||
			atomic.CompareAndSwapUint32(r.cma, cmaReading, cmaRevoked) {
			runtime.KeepAlive(p)
			return t.breakRing(r, err)
		}
		state = atomic.LoadUint32(r.cma)
		if state == cmaFallback {
			return t.breakRing(r, err)
		}
		break
	}
	runtime.KeepAlive(p)
	switch state {
	case cmaDone, cmaSkipped:
		return nil
	case cmaFallback:
		r.cmaOff = true
		if err := t.sendStream(ctx, pe, r, p, 0, nil); err != nil {
			return t.breakRing(r, err)
		}
		return nil
	default:
		return t.protocolError(pe, r, fmt.Errorf("single-copy handshake ended in state %d", state))
	}
}

// Arrived reports whether the next message from rank has arrived: the
// stamp of the ring position Recv reads next is written
// (transport.Prober). Only the receiving goroutine may call it.
func (t *Transport) Arrived(rank int) bool {
	if rank < 0 || rank >= t.size || t.peers[rank] == nil {
		return false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed.Load() {
		return false
	}
	r := &t.peers[rank].in
	return atomic.LoadUint32(r.stamp(r.pos)) == r.pos+1
}

// Recv receives the next message from rank peer into p.
func (t *Transport) Recv(ctx context.Context, rank int, fp *wire.Fingerprint, p []byte) error {
	return t.recv(ctx, rank, fp, len(p), dest{p: p})
}

// RecvSink receives the next message from rank, of n bytes, handing it to
// s slot by slot straight from the ring (transport.SinkReceiver).
func (t *Transport) RecvSink(ctx context.Context, rank int, fp *wire.Fingerprint, n int, s transport.Sink) error {
	return t.recv(ctx, rank, fp, n, dest{sink: s})
}

// dest is where a received message goes: a buffer, or a sink.
type dest struct {
	p    []byte
	sink transport.Sink
}

// put delivers bytes [off, off+len(b)) of the message.
func (d *dest) put(off uint64, b []byte) {
	if d.sink != nil {
		d.sink.Consume(int(off), b)
		return
	}
	copy(d.p[off:], b)
}

func (t *Transport) recv(ctx context.Context, rank int, fp *wire.Fingerprint, n int, d dest) error {
	pe, err := t.begin(rank, fp)
	if err != nil {
		return err
	}
	defer t.mu.RUnlock()
	r := &pe.in
	if atomic.LoadUint32(r.broken) != 0 {
		return brokenError(pe)
	}
	if err := t.awaitData(ctx, pe, r); err != nil {
		return err
	}
	e := r.entry(r.pos)
	h, err := decodeHeader(e)
	if err != nil {
		return t.protocolError(pe, r, err)
	}
	match := h.fp == *fp && h.length == uint64(n)
	switch h.kind {
	case kindInline:
		first := r.firstLen(h.length)
		if match {
			if h.length <= inlineMax {
				d.put(0, e[hdrSize:hdrSize+first])
			} else {
				d.put(0, r.slot(r.pos)[:first])
			}
		}
		r.release()
		if err := t.recvStream(ctx, pe, r, &d, first, h.length, match); err != nil {
			return t.breakRing(r, err)
		}
	case kindCMA:
		p := d.p
		if d.sink != nil {
			p = d.sink.Staging()[:n]
		}
		if err := t.recvCMA(ctx, pe, r, &h, p, match); err != nil {
			return err
		}
		if match && d.sink != nil {
			d.sink.Consume(0, p)
		}
	}
	if !match {
		return mismatch(pe.rank, fp, &h.fp, h.length, n)
	}
	return nil
}

// recvStream consumes the payload bytes [off, total) from whole slots,
// delivering them to d when keep is set.
func (t *Transport) recvStream(ctx context.Context, pe *peer, r *ring, d *dest, off, total uint64, keep bool) error {
	for off < total {
		if err := t.awaitData(ctx, pe, r); err != nil {
			return err
		}
		n := min(total-off, uint64(r.slotBytes))
		if keep {
			d.put(off, r.slot(r.pos)[:n])
		}
		r.release()
		off += n
	}
	return nil
}

// recvCMA handles a single-copy descriptor.
func (t *Transport) recvCMA(ctx context.Context, pe *peer, r *ring, h *msgHeader, p []byte, match bool) error {
	if !atomic.CompareAndSwapUint32(r.cma, cmaPosted, cmaReading) {
		return t.breakRing(r, brokenError(pe))
	}
	result := cmaSkipped
	if match {
		result = cmaDone
		if err := t.readRemote(pe, p, h.addr); err != nil {
			result = cmaFallback
			if !t.cmaWarned.Swap(true) {
				t.log.Warn("shm: single-copy reads refused; copying through the ring instead",
					"peer", pe.rank, "err", err)
			}
		}
	}
	if !atomic.CompareAndSwapUint32(r.cma, cmaReading, result) {
		// The sender revoked the descriptor while we read: p may hold
		// bytes of a reused buffer, and the stream is gone.
		return t.breakRing(r, brokenError(pe))
	}
	r.release()
	if result == cmaFallback {
		if err := t.recvStream(ctx, pe, r, &dest{p: p}, 0, h.length, true); err != nil {
			return t.breakRing(r, err)
		}
	}
	return nil
}

// readRemote copies len(p) bytes at addr in the peer's address space
// into p.
func (t *Transport) readRemote(pe *peer, p []byte, addr uint64) error {
	if t.forceFallback {
		return unix.EPERM
	}
	defer func() { pe.iovLocal[0] = unix.Iovec{} }()
	for off := 0; off < len(p); {
		pe.iovLocal[0].Base = &p[off]
		pe.iovLocal[0].SetLen(len(p) - off)
		pe.iovRemote[0] = unix.RemoteIovec{Base: uintptr(addr) + uintptr(off), Len: len(p) - off}
		n, err := unix.ProcessVMReadv(pe.pid, pe.iovLocal[:], pe.iovRemote[:], 0)
		if err != nil {
			return err
		}
		if n <= 0 {
			return unix.EFAULT
		}
		off += n
	}
	return nil
}

func mismatch(peer int, local, remote *wire.Fingerprint, got uint64, want int) error {
	e := &errs.MismatchError{Peer: peer, Local: *local, Remote: *remote}
	if got != uint64(want) {
		e.Detail = fmt.Sprintf("%d bytes vs %d bytes", got, want)
	}
	return e
}

func brokenError(pe *peer) error {
	return &errs.PeerError{Peer: pe.rank, Kind: errs.ErrPeerLost, Cause: errStreamBroken}
}

// breakRing marks r unusable after a transfer was abandoned half way,
// wakes the other end, and returns err.
func (t *Transport) breakRing(r *ring, err error) error {
	atomic.StoreUint32(r.broken, 1)
	futexWakeAll(r.head)
	futexWakeAll(r.tail)
	return err
}

// protocolError reports a peer that broke the ring protocol.
func (t *Transport) protocolError(pe *peer, r *ring, err error) error {
	if !r.warned {
		r.warned = true
		t.log.Warn("shm: peer violated the ring protocol; dropping the stream", "peer", pe.rank, "err", err)
	}
	return t.breakRing(r, &errs.PeerError{Peer: pe.rank, Kind: errs.ErrPeerLost,
		Cause: fmt.Errorf("protocol violation: %w", err)})
}

// publish makes the position at r.pos (entry and slot) visible to the
// consumer: its stamp first, which the consumer polls, then head, which a
// consumer reads before it sleeps.
func (r *ring) publish() {
	atomic.StoreUint32(r.stamp(r.pos), r.pos+1)
	r.pos++
	atomic.StoreUint32(r.head, r.pos)
	if atomic.LoadUint32(r.consWait) != 0 {
		futexWakeAll(r.head)
	}
}

// spaceSeen reports whether the producer end r knows, without reading the
// consumer's counter again, that the slot at r.pos is free: the counter
// only grows, so a free slot seen earlier stays free. Reading the other
// process's counter costs a cache miss on every message otherwise.
func (r *ring) spaceSeen() bool { return r.pos-r.seen < r.slots }

// release hands the slot at r.pos back to the producer.
func (r *ring) release() {
	r.pos++
	atomic.StoreUint32(r.tail, r.pos)
	if atomic.LoadUint32(r.prodWait) != 0 {
		futexWakeAll(r.tail)
	}
}

// awaitSpace waits until the producer end r has a free slot.
func (t *Transport) awaitSpace(ctx context.Context, pe *peer, r *ring) error {
	if r.spaceSeen() {
		return nil
	}
	for {
		tl := atomic.LoadUint32(r.tail)
		r.seen = tl
		used := r.pos - tl
		if used < r.slots {
			return nil
		}
		if used > r.slots {
			return t.protocolError(pe, r, fmt.Errorf("tail %d and head %d are %d slots apart", tl, r.pos, used))
		}
		if err := t.await(ctx, pe, r, r.tail, tl, r.tail, tl, r.prodWait); err != nil {
			return err
		}
	}
}

// awaitData waits until the consumer end r has a filled slot.
//
// The position's stamp tells: it is written, after the position's bytes,
// before head, which only a consumer about to sleep reads (so that head's
// line mostly stays with the producer).
func (t *Transport) awaitData(ctx context.Context, pe *peer, r *ring) error {
	st := r.stamp(r.pos)
	for {
		s := atomic.LoadUint32(st)
		if s == r.pos+1 {
			return nil
		}
		hd := atomic.LoadUint32(r.head)
		avail := hd - r.pos
		if avail == ^uint32(0) {
			// The last position read was stamped and its head not yet
			// moved: the producer is between the two stores.
			avail = 0
		}
		if avail > r.slots {
			return t.protocolError(pe, r, fmt.Errorf("head %d and tail %d are %d slots apart", hd, r.pos, avail))
		}
		if avail > 0 {
			if atomic.LoadUint32(st) == r.pos+1 {
				return nil
			}
			return t.protocolError(pe, r, fmt.Errorf("head %d passed position %d, stamped %d", hd, r.pos, atomic.LoadUint32(st)))
		}
		if err := t.await(ctx, pe, r, st, s, r.head, hd, r.consWait); err != nil {
			return err
		}
	}
}

// await returns nil once *poll differs from pollOld (while polling) or
// *word from old (while sleeping), or the reason to stop waiting: ctx, a
// local Close or Abort, a broken ring, or a peer that aborted, left or
// died. flag is this end's waiter flag for word. The two words change
// together (poll first): the consumer polls a position's stamp, which
// sits with the data it is about to read, and sleeps on head.
func (t *Transport) await(ctx context.Context, pe *peer, r *ring, poll *uint32, pollOld uint32, word *uint32, old uint32, flag *uint32) error {
	// Poll: first without yielding (a message usually arrives within a
	// microsecond or two, and yielding costs a trip through the scheduler
	// before the next look), then yielding to other goroutines, then sleep.
	// With more local ranks than CPUs the peer may be waiting for this
	// very CPU: yield it to other processes at once and for longer
	// (Open MPI's yield-when-idle), since a futex sleep and wake-up costs
	// tens of microseconds.
	var start time.Time
	yield, limit := t.oversubscribed, spinFor
	if yield {
		limit = yieldFor
	}
	for i := 0; ; i++ {
		if atomic.LoadUint32(poll) != pollOld {
			return nil
		}
		if i%32 == 31 {
			if start.IsZero() {
				start = time.Now()
			} else if d := time.Since(start); d > limit {
				break
			} else {
				yield = yield || d > pollFor
			}
		}
		if yield {
			// Let this process's other goroutines run (with GOMAXPROCS
			// 1 they wait for this one), then, if oversubscribed,
			// other processes.
			runtime.Gosched()
			if t.oversubscribed {
				spin.YieldCPU()
			}
		}
	}
	start = time.Time{}
	for {
		if err := t.stopReason(ctx, pe, r); err != nil {
			return err
		}
		d := sleepTick
		if dl, ok := ctx.Deadline(); ok {
			d = min(d, time.Until(dl))
			if d <= 0 {
				return ctxError(ctx, pe.rank, context.DeadlineExceeded)
			}
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) >= livenessAfter && !pe.alive(&r.pfd) {
			return &errs.PeerError{Peer: pe.rank, Kind: errs.ErrPeerLost, Cause: errGone}
		}
		atomic.StoreUint32(flag, 1)
		if atomic.LoadUint32(word) != old {
			atomic.StoreUint32(flag, 0)
			return nil
		}
		futexSleep(word, old, d, &r.ts)
		atomic.StoreUint32(flag, 0)
		if atomic.LoadUint32(word) != old {
			return nil
		}
	}
}

// stopReason returns why a waiter must stop, or nil.
func (t *Transport) stopReason(ctx context.Context, pe *peer, r *ring) error {
	if t.closed.Load() {
		return errClosed
	}
	if e := t.aborted.Load(); e != nil {
		return e
	}
	if err := ctx.Err(); err != nil {
		return ctxError(ctx, pe.rank, err)
	}
	if atomic.LoadUint32(r.broken) != 0 {
		return brokenError(pe)
	}
	switch st := atomic.LoadUint32(pe.state); {
	case st&stateAborted != 0:
		return &errs.PeerError{Peer: pe.rank, Kind: errs.ErrAborted, Cause: errors.New(t.seg.reason(pe.idx))}
	case st&stateDeparted != 0:
		return &errs.PeerError{Peer: pe.rank, Kind: errs.ErrPeerLost, Cause: errDeparted}
	}
	return nil
}

// ctxError describes err, the end of ctx, met while waiting on rank.
func ctxError(ctx context.Context, rank int, err error) error {
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("shm transport: waiting on rank %d: %w (%w)", rank, err, cause)
	}
	return fmt.Errorf("shm transport: waiting on rank %d: %w", rank, err)
}

// alive reports whether the peer process still runs. pfd is scratch
// space owned by the calling goroutine.
func (pe *peer) alive(pfd *[1]unix.PollFd) bool {
	if pe.pidfd >= 0 {
		pfd[0] = unix.PollFd{Fd: int32(pe.pidfd), Events: unix.POLLIN}
		n, err := unix.Poll(pfd[:], 0)
		return err != nil || n == 0
	}
	return shmdir.Alive(pe.pid)
}

// Abort fails this rank's pending and later calls with an error wrapping
// errs.ErrAborted and cause, records cause in the segment and wakes every
// waiter, so that peers waiting on this rank fail with an
// *errs.PeerError of kind errs.ErrAborted. Only the first Abort counts.
func (t *Transport) Abort(cause error) {
	if cause == nil {
		cause = errors.New("aborted")
	}
	if !t.aborted.CompareAndSwap(nil, &abortError{cause: cause}) {
		return
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed.Load() || t.seg == nil {
		return
	}
	t.seg.setReason(t.me, cause.Error())
	atomic.OrUint32(t.seg.state(t.me), stateAborted)
	t.wakeAll()
}

// wakeAll wakes every futex of the rings between this rank and its peers.
func (t *Transport) wakeAll() {
	for _, pe := range t.peers {
		if pe == nil {
			continue
		}
		futexWakeAll(pe.out.head)
		futexWakeAll(pe.out.tail)
		futexWakeAll(pe.in.head)
		futexWakeAll(pe.in.tail)
	}
	t.groupWakeAll()
}

// Close marks this rank as departed, makes pending calls return
// errs.ErrClosed, waits for them to leave the segment and unmaps it. It
// does not wait for peers. Later calls fail with errs.ErrClosed.
func (t *Transport) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	if t.seg != nil {
		atomic.OrUint32(t.seg.state(t.me), stateDeparted)
		t.wakeAll()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, pe := range t.peers {
		if pe != nil && pe.pidfd >= 0 {
			_ = unix.Close(pe.pidfd)
			pe.pidfd = -1
		}
	}
	if t.seg != nil {
		t.seg.unmap()
	}
	return nil
}
