package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/spin"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// Group calls (transport.Group) run small collectives without messages
// when every rank of the communicator is on this host. Each local rank owns
// a block of the segment's group area: its "done" word on one 128-byte
// line, a sleeper count on the next, then groupSlots slots. A call with
// sequence number s uses slot s mod groupSlots of every rank. A slot is
//
//	 0  uint32 the call's sequence number (low 32 bits), written last
//	 4  uint32 payload length
//	 8  uint8  Coll, uint8 DType, uint8 Op, uint8 reserved
//	12  int32  Root
//	16  int64  Count
//	24  8 bytes reserved
//	32  the payload, up to groupMax bytes
//
// so the sequence word, the fingerprint and the first 32 bytes of payload
// share one cache line: a reader polling the word receives a small
// contribution with the same line transfer. Each rank writes its own slot
// (its fingerprint always, its payload when it contributes one), stores
// the sequence word, and reads the slots it needs — every rank's for
// AllReduce, AllGather and Barrier, the root's for Broadcast, every rank's
// at the root of Reduce — checking each slot's fingerprint and length
// against its own call. Then it stores s in its done word.
//
// A rank may write slot s mod groupSlots again (for call s+groupSlots)
// only once every other rank's done word has reached the call last
// written there: readers never see a slot change under them, and a root
// that only writes (Broadcast, Reduce's non-roots) runs up to
// groupSlots-1 calls ahead. The writer keeps the least done word it last
// read and reads the others' words again only when that is not enough.
//
// Waits are those of the rings: polling, then yielding, then a futex
// sleep on the word awaited, counted in its owner's sleeper word so that
// the owner issues FUTEX_WAKE only when someone sleeps. The owner stores
// a slot's sequence word without a fence (publishSeq) and checks for
// sleepers on it after the fence of its done word, or before it sleeps or
// fails itself (grFlush): one fenced store per call instead of two, and a
// sleeper is woken at most one call's reading later. Before its first
// sleep a call asks its caller for the context (transport.Deferred), and
// then, like a ring wait, stops for a cancelled or expired context, a
// local Abort or Close, a peer's abort or departure, or a peer process
// that no longer exists.

// The group area must fit its block.
var _ [groupBlock - grSlots - groupSlots*groupSlotBytes]struct{}
var _ [groupSlotBytes - groupHdr - groupMax]struct{}

// group is the group-call state of a transport whose communicator is all
// local; calls are serialized by the caller.
type group struct {
	n     int
	last  [groupSlots]uint32 // the sequence number last written in each of this rank's slots
	least uint32             // no other rank's done word is below this
	ctx   context.Context    // the call's context once armed, else nil
	pub   *uint32            // the sequence word this call published, until its sleepers were checked (grFlush)
	ts    unix.Timespec
	pfd   [1]unix.PollFd
}

// free reports whether this rank's slot of call s is known free: every
// other rank was, when last looked at, done with the call last written
// there.
func (g *group) free(s uint32) bool { return int32(g.least-g.last[s%groupSlots]) >= 0 }

// GroupMax returns the largest contribution a group call takes: groupMax
// when every rank of the communicator is on this host, else 0.
func (t *Transport) GroupMax() int {
	if t.grp == nil {
		return 0
	}
	return groupMax
}

func (t *Transport) grWord(q, off int) *uint32 { return t.seg.u32(t.seg.groupOffset(q) + off) }

func (t *Transport) grSlot(q int, s uint32) []byte {
	off := t.seg.groupOffset(q) + grSlots + int(s%groupSlots)*groupSlotBytes
	return t.seg.mem[off : off+groupSlotBytes : off+groupSlotBytes]
}

// GroupRun runs one small collective in the group area
// (transport.Group).
func (t *Transport) GroupRun(d transport.Deferred, fp *wire.Fingerprint, in, out []byte) error {
	g := t.grp
	if g == nil || fp == nil {
		return fmt.Errorf("shm transport: group call without a host-wide segment: %w", errs.ErrInvalidArgument)
	}
	root := int(fp.Root)
	var mine []byte // what this rank publishes
	writer := false // this rank only writes: it reads no other rank's slot
	switch fp.Coll {
	case sched.Barrier:
	case sched.AllReduce, sched.AllGather, sched.ReduceScatter, sched.AllToAll:
		mine = in
	case sched.Reduce, sched.Gather:
		mine, writer = in, t.me != root
	case sched.Broadcast:
		if t.me == root {
			mine, writer = out, true
		}
	case sched.Scatter:
		if t.me == root {
			mine, writer = in, true
		}
	default:
		return fmt.Errorf("shm transport: no group form of %v: %w", fp.Coll, errs.ErrInvalidArgument)
	}
	if len(mine) > groupMax || len(in) > groupMax || root < 0 || root >= g.n || !grLengths(fp.Coll, g.n, t.me == root, len(in), len(out)) {
		return fmt.Errorf("shm transport: group %v of %d bytes into %d, root %d: %w", fp.Coll, len(in), len(out), root, errs.ErrInvalidArgument)
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed.Load() {
		return errClosed
	}
	if e := t.aborted.Load(); e != nil {
		return e
	}
	g.ctx = nil
	s := uint32(fp.Seq)
	if err := t.grPublish(d, fp, s, mine); err != nil {
		return err
	}
	if writer && !t.oversubscribed {
		t.grPrefetchOwn(s+grOwnAhead, len(mine))
	}
	if err := t.grCollect(d, fp, s, mine, in, out); err != nil {
		t.grFlush()
		return err
	}
	// The atomic store is the fence that orders the slot's sequence word
	// too before the sleeper check.
	done := t.grWord(t.me, grDone)
	atomic.StoreUint32(done, s)
	if atomic.LoadUint32(t.grWord(t.me, grSleepers)) != 0 {
		if t.spread {
			noteCPU(t.seg.cpu(t.me))
		}
		futexWakeAll(g.pub)
		futexWakeAll(done)
	}
	g.pub = nil
	return nil
}

// grCollect reads the slots call s needs once this rank published its own
// (mine) and leaves the result in out.
func (t *Transport) grCollect(d transport.Deferred, fp *wire.Fingerprint, s uint32, mine, in, out []byte) error {
	g := t.grp
	root := int(fp.Root)
	var err error
	own := t.grSlot(t.me, s)[groupHdr : groupHdr+len(mine)]
	switch fp.Coll {
	case sched.Barrier:
		for q := range g.n {
			if q != t.me {
				if _, err = t.grRead(d, fp, q, s, 0); err != nil {
					return err
				}
			}
		}
	case sched.AllReduce:
		err = t.grReduce(d, fp, s, own, 0, out)
	case sched.Reduce:
		if t.me == root {
			t.grPrefetchOthers(s, len(in))
			err = t.grReduce(d, fp, s, own, 0, out)
		}
	case sched.ReduceScatter:
		if len(in) != g.n*len(out) {
			return fmt.Errorf("shm transport: ReduceScatter of %d bytes into %d: %w", len(in), len(out), errs.ErrInvalidArgument)
		}
		err = t.grReduce(d, fp, s, own, t.me*len(out), out)
	case sched.AllGather, sched.Gather:
		if fp.Coll == sched.Gather {
			if t.me != root {
				break
			}
			t.grPrefetchOthers(s, len(in))
		}
		for q := range g.n {
			p := own
			if q != t.me {
				if p, err = t.grRead(d, fp, q, s, len(in)); err != nil {
					return err
				}
			}
			copy(out[q*len(in):], p)
		}
	case sched.AllToAll:
		// Block q of every rank's slot goes to rank q.
		b := len(out) / g.n
		for q := range g.n {
			p := own
			if q != t.me {
				if p, err = t.grRead(d, fp, q, s, len(in)); err != nil {
					return err
				}
			}
			copy(out[q*b:(q+1)*b], p[t.me*b:])
		}
	case sched.Scatter:
		p := own
		if t.me != root {
			if !t.oversubscribed {
				t.grPrefetchNext(root, s, g.n*len(out))
			}
			p, err = t.grRead(d, fp, root, s, g.n*len(out))
		}
		if err == nil {
			copy(out, p[t.me*len(out):])
		}
	case sched.Broadcast:
		if t.me != root {
			if !t.oversubscribed {
				t.grPrefetchNext(root, s, len(out))
			}
			var p []byte
			if p, err = t.grRead(d, fp, root, s, len(out)); err == nil {
				copy(out, p)
			}
		}
	}
	return err
}

// grPrefetchNext starts bringing the lines of rank q's slot of call s+1
// that an n-byte payload occupies into this CPU's caches, while call s
// runs. It serves a Broadcast reader: the root runs up to groupSlots-1
// calls ahead, so its next slot is usually written already, and the
// transfer of its lines from the root's CPU (about 60 ns on a two-vCPU
// machine, a third of a small Broadcast) then overlaps this call's work
// instead of starting when the next call reads the slot. A Scatter reader
// and the root of a Reduce or Gather (grPrefetchOthers) do the same. A
// slot not yet written costs its owner one more transfer of the line when
// it writes it.
// Not when ranks outnumber CPUs: a reader then often shares its CPU with
// the root, which is less often ahead, and 4 ranks on 2 CPUs measured
// 5–20% slower with it.
func (t *Transport) grPrefetchNext(q int, s uint32, n int) {
	b := t.grSlot(q, s+1)
	for off := 0; off < groupHdr+n && off < grPrefetchMax; off += 64 {
		prefetch(&b[off])
	}
}

// grPrefetchOthers is grPrefetchNext for every other rank's slot: the
// root of a Reduce or Gather reads them all, and their owners, which wait
// for no one, run ahead as a Broadcast root does.
func (t *Transport) grPrefetchOthers(s uint32, n int) {
	if t.oversubscribed {
		return
	}
	for q := range t.grp.n {
		if q != t.me {
			t.grPrefetchNext(q, s, n)
		}
	}
}

// grPrefetchMax bounds the bytes of a slot grPrefetchNext asks for.
const grPrefetchMax = 256

// grFlush makes sure a process asleep on the sequence word this call
// published is woken: publishSeq checked no sleepers. It runs before this
// rank sleeps and when its call fails.
func (t *Transport) grFlush() {
	g := t.grp
	if g.pub == nil {
		return
	}
	atomic.StoreUint32(g.pub, atomic.LoadUint32(g.pub)) // the fence
	if atomic.LoadUint32(t.grWord(t.me, grSleepers)) != 0 {
		if t.spread {
			noteCPU(t.seg.cpu(t.me))
		}
		futexWakeAll(g.pub)
	}
	g.pub = nil
}

// grLengths reports whether a group call's buffers have the lengths its
// collective needs (n ranks; atRoot: this rank is the root).
func grLengths(coll sched.Coll, n int, atRoot bool, in, out int) bool {
	switch coll {
	case sched.AllReduce:
		return out == in
	case sched.Reduce:
		return !atRoot || out == in
	case sched.AllGather:
		return out == n*in
	case sched.Gather:
		return !atRoot || out == n*in
	case sched.ReduceScatter:
		return in == n*out
	case sched.Scatter:
		return !atRoot || in == n*out
	case sched.AllToAll:
		return in == out && in%n == 0
	}
	return true
}

// grReduce reduces bytes [off, off+len(out)) of every rank's contribution
// of call s into out, in rank order (a group has at least two ranks); own
// is this rank's contribution, as published.
func (t *Transport) grReduce(d transport.Deferred, fp *wire.Fingerprint, s uint32, own []byte, off int, out []byte) error {
	n := len(out)
	if off+n > len(own) {
		return fmt.Errorf("shm transport: reduction of %d bytes at %d of %d: %w", n, off, len(own), errs.ErrInvalidArgument)
	}
	var acc []byte
	for q := range t.grp.n {
		p := own
		if q != t.me {
			var err error
			if p, err = t.grRead(d, fp, q, s, len(own)); err != nil {
				return err
			}
		}
		p = p[off : off+n]
		if acc == nil {
			acc = p
			continue
		}
		reduce.Apply(fp.DType, fp.Op, out, acc, p)
		acc = out
	}
	return nil
}

// grPublish writes this rank's slot of call s: fingerprint, payload, then
// the sequence word. It first waits, if it must, until every other rank
// is done with the call that last used the slot.
func (t *Transport) grPublish(d transport.Deferred, fp *wire.Fingerprint, s uint32, p []byte) error {
	g := t.grp
	i := s % groupSlots
	if w := g.last[i]; !g.free(s) {
		for {
			least, lag := s, -1
			for q := range g.n {
				if q == t.me {
					continue
				}
				if v := atomic.LoadUint32(t.grWord(q, grDone)); int32(v-least) < 0 {
					least, lag = v, q
				}
			}
			g.least = least
			if int32(least-w) >= 0 {
				break
			}
			if err := t.grAwait(d, lag, t.grWord(lag, grDone), w, false); err != nil {
				return err
			}
		}
	}
	b := t.grSlot(t.me, s)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(p)))
	b[8], b[9], b[10], b[11] = byte(fp.Coll), byte(fp.DType), byte(fp.Op), 0
	binary.LittleEndian.PutUint32(b[12:], uint32(fp.Root))
	binary.LittleEndian.PutUint64(b[16:], uint64(fp.Count))
	copy(b[groupHdr:], p)
	word := t.grWord(t.me, grSlots+int(i)*groupSlotBytes)
	publishSeq(word, s)
	g.last[i] = s
	g.pub = word
	return nil
}

// grPrefetchOwn asks for the lines of this rank's slot of call s, a call
// ahead, that an n-byte contribution occupies, in exclusive state
// (prefetchW), if every other rank is done with the call last written
// there. It serves a rank that only writes in its call (a Broadcast or
// Scatter root, a rank other than the root of a Reduce or Gather): every
// rank that read the slot 32 calls earlier still holds a copy of its
// lines; without this, the write of call s must invalidate those copies
// first, and the call's first fenced instruction (the done word, or the
// next lock) waits for it: one trip of a line between CPUs in every call
// of a Broadcast root, which runs ahead of its readers and then sets
// their pace (0.2 against 0.11–0.15 µs a call when such trips are slow;
// a reader that keeps pace with the root still takes the lines first).
// Asked grOwnAhead calls ahead, the transfer overlaps the calls between.
// A slot still in use is left alone: taking its lines would cost its
// reader a miss. Ranks that read others' slots in the same call
// (AllReduce, Barrier, ...) wait for those lines anyway, and an
// exclusive request of their own in flight then measured up to 8%
// slower at 8 bytes.
func (t *Transport) grPrefetchOwn(s uint32, n int) {
	if !hasPrefetchW || !t.grp.free(s) {
		return
	}
	b := t.grSlot(t.me, s)
	for off := 0; off < groupHdr+n && off < grPrefetchMax; off += 64 {
		prefetchW(&b[off])
	}
}

// grOwnAhead is how many calls ahead grPrefetchOwn asks for this rank's
// slot. Two, not one: the others read this rank's slot of call s+1 as
// soon as they finish call s, and a line asked for before they poll it
// would only travel to them and back.
const grOwnAhead = 2

// grRead waits for local rank q's slot of call s, checks its fingerprint
// and length (n bytes) against this rank's call, and returns its payload.
func (t *Transport) grRead(d transport.Deferred, fp *wire.Fingerprint, q int, s uint32, n int) ([]byte, error) {
	b := t.grSlot(q, s)
	word := t.grWord(q, grSlots+int(s%groupSlots)*groupSlotBytes)
	if atomic.LoadUint32(word) != s {
		if err := t.grAwait(d, q, word, s, true); err != nil {
			return nil, err
		}
	}
	got := uint64(binary.LittleEndian.Uint32(b[4:]))
	// Field by field: a Fingerprint built from the bytes and compared
	// whole would be loaded wide from its own narrow stores.
	if sched.Coll(b[8]) != fp.Coll || reduce.DType(b[9]) != fp.DType || reduce.Op(b[10]) != fp.Op ||
		int32(binary.LittleEndian.Uint32(b[12:])) != fp.Root || int64(binary.LittleEndian.Uint64(b[16:])) != fp.Count || got != uint64(n) {
		remote := wire.Fingerprint{Seq: fp.Seq, Coll: sched.Coll(b[8]), DType: reduce.DType(b[9]), Op: reduce.Op(b[10]),
			Root: int32(binary.LittleEndian.Uint32(b[12:])), Count: int64(binary.LittleEndian.Uint64(b[16:]))}
		return nil, mismatch(t.local[q], fp, &remote, got, n)
	}
	return b[groupHdr : groupHdr+n], nil
}

// grAwait waits until *word, owned by local rank q, equals want (eq: a
// slot's sequence word) or has reached it in serial-number order (!eq: a
// done word).
func (t *Transport) grAwait(d transport.Deferred, q int, word *uint32, want uint32, eq bool) error {
	var start time.Time
	yield, limit := t.oversubscribed, spinFor
	if yield {
		limit = yieldFor
	}
	for i := 0; ; i++ {
		if grReached(atomic.LoadUint32(word), want, eq) {
			return nil
		}
		if i%32 == 31 {
			if start.IsZero() {
				start = time.Now()
			} else if dt := time.Since(start); dt > limit {
				break
			} else {
				yield = yield || dt > pollFor
			}
		}
		if yield {
			runtime.Gosched()
			if t.oversubscribed {
				spin.YieldCPU()
			}
		}
	}
	g := t.grp
	t.grFlush()
	if g.ctx == nil {
		g.ctx = d.Arm()
	}
	ctx := g.ctx
	sleepers := t.grWord(q, grSleepers)
	start = time.Time{}
	slept := false
	for {
		v := atomic.LoadUint32(word)
		if grReached(v, want, eq) {
			if slept {
				t.moveApart(t.seg.cpu(q))
			}
			return nil
		}
		if err := t.grStop(ctx, q, want, eq); err != nil {
			return err
		}
		dl := sleepTick
		if ddl, has := ctx.Deadline(); has {
			dl = min(dl, time.Until(ddl))
			if dl <= 0 {
				return ctxError(ctx, t.local[q], context.DeadlineExceeded)
			}
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) >= livenessAfter {
			if j := t.grDead(want, eq); j >= 0 {
				return &errs.PeerError{Peer: t.local[j], Kind: errs.ErrPeerLost, Cause: errGone}
			}
		}
		atomic.AddUint32(sleepers, 1)
		if atomic.LoadUint32(word) == v {
			futexSleep(word, v, dl, &g.ts)
			slept = true
		}
		atomic.AddUint32(sleepers, ^uint32(0))
	}
}

func grReached(v, want uint32, eq bool) bool {
	return v == want || (!eq && int32(v-want) >= 0)
}

// grMissing reports whether local rank j has not yet reached what this
// rank awaits: its slot of call want (eq), or its done word at want.
func (t *Transport) grMissing(j int, want uint32, eq bool) bool {
	if eq {
		return atomic.LoadUint32(t.grWord(j, grSlots+int(want%groupSlots)*groupSlotBytes)) != want
	}
	return !grReached(atomic.LoadUint32(t.grWord(j, grDone)), want, false)
}

// grStop returns why a group wait on local rank q must stop, or nil: a
// local Close or Abort, the context, any local rank's abort, or the
// departure of a rank that has not reached what this rank awaits (a rank
// that published its part and then closed is no reason).
func (t *Transport) grStop(ctx context.Context, q int, want uint32, eq bool) error {
	if t.closed.Load() {
		return errClosed
	}
	if e := t.aborted.Load(); e != nil {
		return e
	}
	if err := ctx.Err(); err != nil {
		return ctxError(ctx, t.local[q], err)
	}
	for j := range t.grp.n {
		if j == t.me {
			continue
		}
		st := atomic.LoadUint32(t.seg.state(j))
		if st&stateAborted != 0 {
			return &errs.PeerError{Peer: t.local[j], Kind: errs.ErrAborted, Cause: errors.New(t.seg.reason(j))}
		}
		if st&stateDeparted != 0 && t.grMissing(j, want, eq) {
			return &errs.PeerError{Peer: t.local[j], Kind: errs.ErrPeerLost, Cause: errDeparted}
		}
	}
	return nil
}

// grDead returns a local rank that has not reached what this rank awaits
// and whose process no longer runs, or -1. Every such rank is checked, not
// only the one waited on: a rank waiting on a live but idle peer must
// still notice that a third one died.
func (t *Transport) grDead(want uint32, eq bool) int {
	for j := range t.grp.n {
		if j == t.me || !t.grMissing(j, want, eq) {
			continue
		}
		if !t.peers[t.local[j]].alive(&t.grp.pfd) {
			return j
		}
	}
	return -1
}

// groupWakeAll wakes every process asleep on a word of the group area.
func (t *Transport) groupWakeAll() {
	if t.grp == nil {
		return
	}
	for q := range t.grp.n {
		if atomic.LoadUint32(t.grWord(q, grSleepers)) == 0 {
			continue
		}
		futexWakeAll(t.grWord(q, grDone))
		for i := range groupSlots {
			futexWakeAll(t.grWord(q, grSlots+i*groupSlotBytes))
		}
	}
}
