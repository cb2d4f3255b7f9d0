package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"os"
	"slices"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// Moving a pair's lead stream off a path that stopped.
//
// Each direction of a pair has a lead stream: the connection carrying its
// small messages and the first stripe of its large ones (connection 0, the
// first path's, at first). A stripe path that stops is repaired over the
// lead (failover.go); when the lead's own path stops, the lead moves, on
// pairs with several paths whose kernel tells acknowledgements (Linux),
// with any number of sockets a path (up to 16 connections a pair). With
// several, the stripes on the lead path's other sockets are followed like
// the other paths' (failover.go): one that stops moves the lead, and then
// goes again as a repair on the new lead.
//
//   - The sender keeps a copy of the small frames it wrote on the lead that
//     may be unacknowledged (replay.go), and a striped Send waits for the
//     peer's host to acknowledge the whole lead part, as it does the other
//     stripes, so nothing written on the lead is lost with the path. So
//     what a stopped lead can lose is some small frames and, after them,
//     the header and first stripe of the one striped message whose Send
//     is in progress.
//   - A watch per pair checks the lead every StallAfter/8. Data in flight
//     with no acknowledgement for StallAfter (as the watch saw it, or
//     two retransmission timeouts in a row of the oldest segment and no
//     acknowledgement for half of StallAfter) stops the path: the lead moves
//     to the first connection of another path in use, with a lead frame
//     (wire.FrameLead) naming the old path and carrying the resume offset
//     (what the peer's host acknowledged on the old lead) and the bytes
//     written since. The old path is retired and dialed again (redial.go),
//     and comes back as a stripe path. A stripe planned on the new lead's
//     connection, of a message whose first stripe went on the old lead,
//     travels on the new lead stream right after that first stripe.
//   - The receiver's watch looks, without reading, at the front of the
//     other paths' first connections between stripes; a lead frame there
//     wakes the receive waiting on the lead, which joins the streams (see
//     resume): it reads the old lead as far as the resume offset (what was
//     acknowledged is in its socket), skips the bytes of the replay it
//     already had, and goes on reading the new connection. A message whose
//     header was written while the old lead led has its first stripe on the
//     old lead's connection; others on the new one. A stripe can come before
//     its header, which may be lost with the lead's path, and a lead frame
//     wait behind it: so while a receive waits for a header on an idle
//     lead, a stripe of the message it expects (its call's fingerprint,
//     within its buffer, which is large enough to be striped) at the front
//     of another path's first connection is read at once (preRead), and
//     the header, when it comes, must name it. A stripe of a later message
//     (the receive waits for a small message lost, or cut in the middle,
//     before it) is read too, into a buffer of its own that grows as the
//     bytes come (kept, keptMax a pair: a Send larger than that waits for
//     the small frames before it instead, leadQuiet), once the lead made
//     no progress for keepAfter looks in a row of the watch, whether the
//     receive waits for a header, the rest of one, or a payload; the next
//     striped header that names its connection takes it (useKept). Only
//     a lead path
//     stalled for keepAfter/8 of StallAfter (stopped, or losing a segment
//     twice in a row) gets there, so the copy and the allocation stay off
//     the common path. A receiver that joins a move off the path its own
//     send lead is on moves that lead too, at its next Send (sfollow),
//     instead of waiting for a stall of its own: the peer's host already
//     found the path stopped.
//
// With every path stopped nothing moves: the pair waits for a path to come
// back, or for DeadAfter. A lead that stalls with no path to move to (every
// other path retired, or dialed again with its rejoin frame unacknowledged
// on the stalled lead, which the peer would not look at) fails the pair
// with ErrPeerLost once it has had no acknowledgement for DeadAfter (the
// watch; a stripe on the lead's path's other sockets likewise, checkStalls),
// as a dead host would: the kernel's own bound (TCP_USER_TIMEOUT) closes
// the connection then, and a Send waiting for acknowledgements would
// otherwise wait for its call's deadline. A Send's frames on the lead too
// large for the copy (its first stripe, then repairs) are kept by
// reference until acknowledged (peer.seg, peer.segx), so a lead that stops
// during a Send that repaired a stripe on it moves too. The move picks the
// path the peer moved its own lead onto, if it did, then a path that does
// not look stopped as well (data unacknowledged for half of StallAfter);
// an idle path whose link went down with the lead's looks like any other,
// and may be picked. So the lead may stop again before the peer's host
// acknowledged the lead frame of its last move (or its write, bounded by
// StallAfter, may take only part of it): it moves again. Offsets of the
// lead stream count its bytes across moves (the lead frame's resume
// offset is one, and the copy and the Send's frames are kept, by those
// offsets, until the new lead's host acknowledges them), and bytes on a
// lead before its lead frame was acknowledged count as where that frame
// resumed: the second lead frame resumes where the first did, and carries
// its replay again. The receiver counts what it read the same way
// (conn.leadRead), so it joins the second frame from the lead it reads,
// whether it joined the first (the replay's start is skipped) or never
// saw it (lost with its path): the lead it never joined is then never
// read as a lead (conn.leadLeft), and a striped header names the path its
// first stripe went on (wire.FrameHeader.First), so one replayed from a
// lead this rank never joined, however many moves back, is placed right.
// A frame resuming past what the receiver's lead holds waits while the
// lead frame of the lead it leaves may still come.

// errLeadMoved is a receive worker's answer when it found the lead frame
// of a move where it expected a stripe.
var errLeadMoved = errors.New("tcp: the lead stream moved onto this connection")

// errNoMove reports that the lead could not be moved.
var errNoMove = errors.New("tcp: no other path to move the lead stream to")

// setupLead prepares the lead streams of pr once its connections are up.
func (pr *peer) setupLead() {
	pr.sl, pr.rl = pr.conns[0], pr.conns[0]
	if !pr.failover || len(pr.conns) > 16 {
		// (The receive keeps connections in 16-bit sets: rpre, keptOn.)
		return
	}
	for _, c := range pr.conns {
		if !pr.setKbase(c) {
			return
		}
	}
	pr.leadOK = true
	pr.llog = newLeadLog(leadLogSize)
	pr.segx = make([]leadSeg, 0, len(pr.conns)+1)
	pr.t.spawn(pr.watchLead)
}

// setKbase notes where c's stream starts in the kernel's counts, before
// anything is written on it. Linux counts the SYN in the dialer's
// bytes_acked (not in its bytes_sent), and the dialer is the pair's lower
// rank.
func (pr *peer) setKbase(c *conn) bool {
	w, _, ok := streamCounts(c)
	if !ok {
		return false
	}
	c.kbase = w - c.wrote
	if pr.rank > pr.t.rank {
		c.kbase++
	}
	return true
}

// ackedAt returns the stream offset up to which the peer's host
// acknowledged c's bytes.
func (pr *peer) ackedAt(c *conn) (uint64, bool) {
	_, acked, ok := streamCounts(c)
	if !ok || acked < c.kbase {
		return 0, false
	}
	if h := pr.t.testAcked; h != nil {
		return h(c, acked-c.kbase), true
	}
	return acked - c.kbase, true
}

// leadAt returns the lead stream's offset (counted across moves) of the
// send lead's stream offset a. Bytes before the lead frame that made sl
// the lead count as where that frame resumed: what the peer's host holds
// of the lead stream up to there is on an older lead. The caller holds
// smu.
func (pr *peer) leadAt(a uint64) uint64 {
	if a < pr.slcs {
		return pr.slres
	}
	return pr.slres + (a - pr.slcs)
}

// leadAcked returns the lead stream's offset up to which the peer's host
// acknowledged it (leadAt of what it acknowledged on sl). The caller holds
// smu.
func (pr *peer) leadAcked() (uint64, bool) {
	a, ok := pr.ackedAt(pr.sl)
	if !ok {
		return 0, false
	}
	return pr.leadAt(a), true
}

// watchLead checks the pair's lead streams until the pair fails or the
// transport closes.
func (pr *peer) watchLead() {
	t := pr.t
	every := max(t.stallAfter/8, time.Millisecond)
	timer := time.NewTimer(every)
	defer timer.Stop()
	var stuck time.Time   // since when the send lead holds data it does not take
	var stopped time.Time // since when it did, when it could not move since
	var lastAcked uint64
	var lastSL *conn
	ahead := 0 // looks in a row with a stripe ahead of an idle receive lead
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-pr.failed:
			return
		case <-timer.C:
		}
		timer.Reset(every)
		now := time.Now()
		pr.mu.Lock()
		sl := pr.sl
		pr.mu.Unlock()
		if sl != lastSL {
			stuck, stopped, lastSL = time.Time{}, time.Time{}, sl
		}
		unacked, blocked, ackAge, ok := sendState(sl)
		acked, _ := pr.ackedAt(sl)
		if ok && unacked && blocked && ackAge >= t.stallAfter/2 && timeouts(sl) >= 2 && stuck.IsZero() {
			// Two retransmission timeouts in a row (at least 600 ms
			// of a segment unacknowledged) and no acknowledgement for
			// half the bound: the bound is counted from when the data
			// went out, not from when this watch first saw it.
			stuck = now.Add(-t.stallAfter)
		}
		if h := t.testStall; h != nil && h(sl) {
			unacked, blocked, ok, stuck = true, true, true, now.Add(-t.stallAfter)
			lastAcked = acked
		}
		switch {
		case !ok || !unacked || !blocked || acked != lastAcked:
			stuck, stopped = time.Time{}, time.Time{}
		case stuck.IsZero():
			stuck = now
		case now.Sub(stuck) >= t.stallAfter && !stopped.IsZero() && t.deadAfter > 0 && now.Sub(stopped) >= t.deadAfter:
			// The lead stalled with no path to move to for as long as
			// a connection may go unanswered: every path to the peer
			// stopped, as when the peer's host is gone.
			pr.fail(pr.allStopped(sl.path, now.Sub(stopped)))
		case now.Sub(stuck) >= t.stallAfter && !pr.canMove(sl):
			if stopped.IsZero() {
				stopped = stuck
			}
		case now.Sub(stuck) >= t.stallAfter:
			if stopped.IsZero() {
				stopped = stuck // (reset once the lead moved)
			}
			pr.sstalled.Store(true)
			if pr.smu.TryLock() {
				if pr.sstalled.Load() && pr.sl == sl {
					// errNoMove leaves the lead where it is: the pair
					// waits for a path to come back, or for DeadAfter.
					// Any other error failed the pair.
					if err := pr.moveLead(fmt.Sprintf("no acknowledgement for %v", now.Sub(stuck).Round(time.Millisecond))); err != nil && err != errNoMove {
						pr.fail(err)
					}
				}
				pr.smu.Unlock()
			} else {
				// A Send holds the lead: interrupt its write; it moves
				// the lead itself.
				sl.nc.SetWriteDeadline(aLongTimeAgo)
			}
			stuck = time.Time{}
		}
		lastAcked = acked
		switch lead, stripe := pr.findLeadFrame(); {
		case lead:
			ahead = 0
			pr.rkeep.Store(false)
			pr.rmove.Store(true)
			pr.recv.pokeLead()
		case stripe && (pr.rhdrWait.Load() || pr.rbody.Load()):
			// A stripe came before its header, which may be lost with
			// the lead's path: the receive reads it now, so that a lead
			// frame behind it can be seen; one of a later message only
			// once the lead stayed idle for keepAfter looks.
			if pr.recvLeadIdle() {
				ahead++
			} else {
				ahead = 0
			}
			pr.rkeep.Store(ahead >= keepAfter)
			pr.rstripe.Store(true)
			pr.recv.pokeLead()
		default:
			ahead = 0
			pr.rkeep.Store(false)
		}
	}
}

// allStopped returns the pair's failure when its send lead's path p has
// had data unacknowledged for d (at least DeadAfter) and the lead could
// not move off it: no other path is in use, or none the peer was told of
// (a path dialed again whose rejoin frame went on the stopped lead).
func (pr *peer) allStopped(p *path, d time.Duration) error {
	return &errs.PeerError{Peer: pr.rank, Kind: errs.ErrPeerLost, Cause: fmt.Errorf(
		"tcp: every path stopped: the connection of path %d to rank %d got no acknowledgement for %v and the lead stream had no other path to move to",
		p.idx, pr.rank, d.Round(time.Millisecond))}
}

// canMove reports whether a path other than lead's is in use.
func (pr *peer) canMove(lead *conn) bool {
	for _, p := range pr.paths {
		if p != lead.path && !p.retired.Load() {
			return true
		}
	}
	return false
}

// candidates calls f with the first connection of every path other than
// the receive lead's, as the receive direction uses it, until f reports
// true.
func (pr *peer) candidates(f func(c *conn) bool) bool {
	pr.mu.Lock()
	rl := pr.rl
	var cs [MaxPaths]*conn
	n := 0
	for _, p := range pr.paths {
		if c := pr.rview[p.conns[0].pos]; p != rl.path && c != pr.rlOld && !c.leadLeft.Load() {
			cs[n] = c
			n++
		}
	}
	pr.mu.Unlock()
	for _, c := range cs[:n] {
		if f(c) {
			return true
		}
	}
	return false
}

// findLeadFrame reports whether a lead frame waits at the front of another
// path's first connection (one whose reader is between frames), and
// whether a stripe does.
func (pr *peer) findLeadFrame() (lead, stripe bool) {
	lead = pr.candidates(func(c *conn) bool {
		if !c.rmu.TryLock() {
			return false
		}
		defer c.rmu.Unlock()
		h, _, ok := c.peekFront()
		stripe = stripe || ok && h.Type == wire.FrameStripe && h.Paths == 0
		return ok && h.Type == wire.FrameLead
	})
	return lead, stripe
}

// keepAfter is how many looks in a row of the watch (StallAfter/8 apart)
// must find a stripe ahead while the receive lead has nothing to read
// before the receive reads a later message's stripe into a buffer of its
// own (kept).
const keepAfter = 3

// keptMax bounds the bytes of the kept stripes of a pair, all connections
// together: a stripe that would take them beyond it is left where it is
// (the pair then waits for the lead, or for DeadAfter, as without
// keeping). keptChunk is how much a kept stripe's buffer grows by at a
// time, so that the memory follows the bytes that came, not the length a
// header claims.
const (
	keptMax   = 256 << 20
	keptChunk = 1 << 20
)

// keptMax is keptMax, or what a test set instead (testKeptMax).
func (t *Transport) keptMax() uint64 {
	if t.testKeptMax != 0 {
		return t.testKeptMax
	}
	return keptMax
}

// keptStripe is a stripe of a message after the one being received, read
// ahead of a lead frame (see the top of this file).
type keptStripe struct {
	pos  int
	c    *conn // the connection (of its generation, redial.go) it came on
	h    wire.FrameHeader
	data []byte
}

// recvLeadIdle reports whether the receive lead's socket holds nothing to
// read.
func (pr *peer) recvLeadIdle() bool {
	pr.mu.Lock()
	rl := pr.rl
	pr.mu.Unlock()
	q, ok := rl.front.queued()
	return ok && q == 0
}

// leadStill reports, at a wake-up of the receive for a stripe ahead (the
// watch's, one a look), whether the receive lead, stopped in the middle of
// a frame, read nothing and had nothing to read at this wake-up and the
// keepAfter-1 before it. The caller holds the receive gate and the lead's
// rmu.
func (pr *peer) leadStill() bool {
	c := pr.rl
	q, ok := c.front.queued()
	if !ok || q != 0 || c.aend != c.aoff || c.prev != nil || c.inReplay() || c.rread != pr.rstillAt {
		pr.rstill, pr.rstillAt = 0, c.rread
		return false
	}
	pr.rstill++
	return pr.rstill >= keepAfter
}

// idle reports whether the receive lead c has nothing to read: no frame
// begun, nothing read ahead or joined, an empty socket. The caller holds
// rmu.
func (c *conn) idle() bool {
	if c.rhn != 0 || c.peeked || c.aend != c.aoff || c.prev != nil || c.inReplay() {
		return false
	}
	q, ok := c.front.queued()
	return ok && q == 0
}

// preRead's rule below needs a Send of stripeMin bytes to be a frame
// larger than leadCopyMax, which returns only once its header was
// acknowledged: this does not compile where it is not.
var _ [stripeMin + wire.FrameHeaderSize - leadCopyMax - 1]struct{}

// preRead reads into p, before the header of the message the receive
// waits for, the stripes of that message (fingerprint fp) waiting at the
// front of the other paths' first connections: their header may have
// been lost with the lead's path, and a lead frame may wait behind them.
// With keep, it reads the stripes there of a later message too, into
// buffers of their own (pr.rkept). The caller holds the receive gate and
// the lead's rmu.
func (pr *peer) preRead(ctx context.Context, fp *wire.Fingerprint, p []byte, keep bool) error {
	if fp == nil && !keep {
		return nil
	}
	var err error
	pr.candidates(func(c *conn) bool {
		if pr.rgone&(1<<c.path.idx) != 0 {
			// The peer retired the path: what is left on this
			// generation of it is out of step (a stripe a repair
			// replaced, maybe cut short) and never read.
			return false
		}
		if (pr.rpre|pr.keptOn())&(1<<c.pos) != 0 {
			// Read already, or the front is of a message after the
			// kept one's.
			return false
		}
		c.rmu.Lock()
		defer c.rmu.Unlock()
		h, pings, ok := c.peekFront()
		if !ok || h.Type != wire.FrameStripe || h.Paths != 0 {
			return false
		}
		// The fingerprint names the call, which may send this peer
		// several messages. A stripe is of the message awaited only if
		// that one is large enough to be striped: a Send of stripeMin
		// bytes or more returns only once its header was acknowledged,
		// so the stripes of the messages after it go out only once
		// that header is in this rank's socket (and the lead is not
		// idle). Before a smaller message, any stripe is of a later one.
		// The lead is looked at after the peek, not only by the caller
		// before the loop: the awaited message may have come whole on
		// the lead since, and a later one's stripe after it.
		mine := fp != nil && h.Fingerprint == *fp && len(p) >= stripeMin && h.Offset <= uint64(len(p)) && h.Len <= uint64(len(p))-h.Offset && pr.rl.idle()
		if !mine && (!keep || h.Len > pr.t.keptMax()-pr.keptBytes()) {
			if keep && !pr.rbig {
				pr.rbig = true // once per receive
				pr.t.log.Warn("tcp: a stripe ahead of the lead stream is larger than what a pair keeps; left in place",
					"peer", pr.rank, "path", c.path.idx, "bytes", h.Len, "kept", pr.keptBytes(), "max", pr.t.keptMax())
			}
			return false
		}
		pr.recv.arm(len(pr.conns))
		if c.peeked {
			c.peeked = false
		} else {
			for range pings + 1 {
				if _, err = io.ReadFull(c, c.rhdr[:]); err != nil {
					return true
				}
			}
		}
		var part []byte
		if mine {
			part = p[h.Offset : h.Offset+h.Len]
			_, err = io.ReadFull(c, part)
		} else {
			part, err = readKept(c, h.Len) // rare: see the top of this file
		}
		if err == nil {
			err = checkCRC(pr.rank, &h, part)
		}
		if err != nil {
			return true
		}
		c.path.received.Add(h.Len)
		if !mine {
			pr.rkept = append(pr.rkept, keptStripe{pos: c.pos, c: c, h: h, data: part})
			pr.t.log.Info("tcp: read a stripe of a later message ahead of the lead stream",
				"peer", pr.rank, "path", c.path.idx, "fingerprint", h.Fingerprint.String(), "bytes", h.Len)
			return false
		}
		pr.rpre |= 1 << c.pos
		pr.rext = append(pr.rext, extent{off: h.Offset, len: h.Len, pos: c.pos, ok: true})
		return false
	})
	return err
}

// readKept reads a kept stripe of n bytes from r into a buffer that grows
// as the bytes come, keptChunk at a time.
func readKept(r io.Reader, n uint64) ([]byte, error) {
	var b []byte
	for uint64(len(b)) < n {
		k := int(min(n-uint64(len(b)), keptChunk))
		b = slices.Grow(b, k)
		got, err := io.ReadFull(r, b[len(b):len(b)+k])
		b = b[:len(b)+got]
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// keptBytes returns the bytes of the kept stripes. The caller holds the
// receive gate.
func (pr *peer) keptBytes() uint64 {
	var n uint64
	for _, k := range pr.rkept {
		n += uint64(len(k.data))
	}
	return n
}

// keptOn returns the positions of the kept stripes. The caller holds the
// receive gate.
func (pr *peer) keptOn() uint16 {
	var on uint16
	for _, k := range pr.rkept {
		on |= 1 << k.pos
	}
	return on
}

// useKept puts into buf the kept stripes that came on connections of parts,
// the stripes of the message whose header h the receive read, as stripes
// read before their header (pr.rpre). A kept stripe is of the first
// striped message after it that uses its connection: it must name h's
// fingerprint and lie within it, and have come on the generation of its
// connection that the receive still uses (a rejoin frame, redial.go, moves
// a path's receives to a new generation only after the messages written
// on the old one, so a stripe kept from the old one whose message did not
// come before it is the peer breaking the protocol). The caller holds the
// receive gate.
func (pr *peer) useKept(h *wire.FrameHeader, parts []*conn, buf []byte) error {
	var on uint16
	for _, c := range parts {
		on |= 1 << c.pos
	}
	k := 0
	for _, s := range pr.rkept {
		if on&(1<<s.pos) == 0 {
			pr.rkept[k] = s
			k++
			continue
		}
		if s.c != pr.rview[s.pos] {
			return fmt.Errorf("rank %d sent a stripe of %v ahead of a lead frame on path %d before moving the path to a new generation, and no message took it: %w",
				pr.rank, s.h.Fingerprint, s.c.path.idx, errProtocol)
		}
		if s.h.Fingerprint != h.Fingerprint || s.h.Offset > h.Total || s.h.Len > h.Total-s.h.Offset || pr.rpre&(1<<s.pos) != 0 {
			return fmt.Errorf("rank %d sent a stripe of %v (%d bytes at %d) ahead of a lead frame; the message there is %v of %d bytes: %w",
				pr.rank, s.h.Fingerprint, s.h.Len, s.h.Offset, h.Fingerprint, h.Total, errProtocol)
		}
		copy(buf[s.h.Offset:], s.data)
		pr.rpre |= 1 << s.pos
		pr.rext = append(pr.rext, extent{off: s.h.Offset, len: s.h.Len, pos: s.pos, ok: true})
	}
	clear(pr.rkept[k:])
	pr.rkept = pr.rkept[:k]
	if len(pr.rkept) == 0 {
		pr.rkept = nil // the buffers go
	}
	return nil
}

// checkPre checks the stripes read before the header h of their message:
// on connections its stripes travel on (parts), within the message.
func (pr *peer) checkPre(h *wire.FrameHeader, parts []*conn) error {
	var on uint16
	for _, c := range parts {
		on |= 1 << c.pos
	}
	if pr.rpre&^on != 0 {
		return fmt.Errorf("rank %d sent a stripe of %v on a connection its first stripe does not name: %w", pr.rank, h.Fingerprint, errProtocol)
	}
	for _, e := range pr.rext {
		if e.off+e.len > h.Total {
			return fmt.Errorf("rank %d sent a stripe at %d of %d bytes of a %d-byte message: %w", pr.rank, e.off, e.len, h.Total, errProtocol)
		}
	}
	return nil
}

// peekFront decodes the first frame header other than a ping at the front
// of c's stream without taking it, if it is all there and c's reader is
// between frames, and says how many pings come before it. The caller
// holds rmu.
func (c *conn) peekFront() (h wire.FrameHeader, pings int, ok bool) {
	if c.peeked && !c.rjob.Load() {
		return c.peek, 0, c.peek.Type != wire.FramePing
	}
	if c.rhn != 0 || c.draining || c.prev != nil || c.rjob.Load() {
		return h, 0, false
	}
	b := c.ahead[c.aoff:c.aend]
	if len(b) == 0 {
		b = c.front.bytes()
	}
	b = b[:min(len(b), 8*wire.FrameHeaderSize)]
	for at := 0; at+wire.FrameHeaderSize <= len(b); at += wire.FrameHeaderSize {
		if h.Unmarshal(b[at:]) != nil {
			return h, 0, false
		}
		if h.Type != wire.FramePing {
			return h, pings, true
		}
		pings++
	}
	return h, 0, false
}

// leadRoom makes room in the replay copy for a frame of n bytes on the
// send lead: it drops what the peer's host acknowledged and, if that is
// not enough, waits for more acknowledgements. The caller holds smu.
func (pr *peer) leadRoom(ctx context.Context, n int) error {
	return pr.leadWait(ctx, 20*time.Microsecond, func() bool {
		if pr.llog.fits(n) {
			return true
		}
		// Rare: a ring's worth of small frames since the last look.
		if a, ok := pr.leadAcked(); ok {
			pr.llog.trim(a)
		}
		return pr.llog.fits(n)
	})
}

// leadQuiet waits until the peer's host acknowledged everything the
// replay copy holds, moving the lead if it stalls meanwhile: a Send whose
// stripes the receiver could not keep ahead of a lead frame (keptMax)
// waits here, so that none stands in front of a lead frame behind a lost
// small message. The caller holds smu.
func (pr *peer) leadQuiet(ctx context.Context) error {
	return pr.leadWait(ctx, 5*time.Microsecond, func() bool {
		if h := pr.t.testLeadAt; h != nil {
			h("quiet")
		}
		a, ok := pr.leadAcked()
		if !ok {
			return true
		}
		pr.llog.trim(a)
		return pr.llog.held() == 0
	})
}

// leadWait polls done until it holds: first at once, then after backoff,
// doubling up to 2 ms. Between polls it moves the send lead if the watch
// found it stalled, and it ends with the call's error. The caller holds
// smu.
func (pr *peer) leadWait(ctx context.Context, backoff time.Duration, done func() bool) error {
	for !done() {
		if err := pr.leadStalled("send"); err != nil {
			return err
		}
		if err := pr.t.callErr(ctx, pr, nil); err != nil {
			return err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Millisecond)
	}
	// A connection the pair's failure closed gives no counts, which
	// done takes for nothing left to wait for.
	return pr.err()
}

// leadStalled moves the send lead if the watch found it stalled. The caller
// holds smu.
func (pr *peer) leadStalled(during string) error {
	if !pr.sstalled.Load() {
		return nil
	}
	why := "no acknowledgement during a " + during
	if pr.sfollow.Swap(false) {
		why = "the peer moved its lead stream off the path"
	}
	if err := pr.moveLead(why); err != nil {
		if err != errNoMove {
			return err
		}
		// The lead stays. The watch may have interrupted a write on it
		// with an immediate deadline, which the gate (arming only the
		// deadlines it changes) would not clear: put its own back.
		pr.send.restoreLead()
	}
	return nil
}

// awaitLead waits until the peer's host acknowledged everything written on
// the send lead, moving the lead if it stalls, then empties the replay
// copy there. The caller holds smu.
func (pr *peer) awaitLead(ctx context.Context) error {
	return pr.leadWait(ctx, 20*time.Microsecond, func() bool {
		if h := pr.t.testLeadAt; h != nil {
			h("await")
		}
		a, ok := pr.ackedAt(pr.sl)
		if !ok {
			return true
		}
		if a < pr.sl.wroteAt() {
			return false
		}
		pr.dropSegs()
		pr.llog.reset(pr.leadAt(a))
		return true
	})
}

func (c *conn) wroteAt() uint64 {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.wrote
}

// leadSeg is a frame of the current Send written on the send lead without
// a copy (too large for the ring): its header and payload, from stream
// offset at. The first is peer.seg; those after it in the same Send
// (repairs, failover.go) are peer.segx, each right after the one before on
// the stream.
type leadSeg struct {
	on    bool
	extra bool // something else went between the Send's frames on the lead: no move
	at    uint64
	hdr   [wire.FrameHeaderSize]byte
	part  []byte
}

// end returns the stream offset after s.
func (s *leadSeg) end() uint64 { return s.at + uint64(len(s.hdr)+len(s.part)) }

// dropSegs forgets the Send's frames on the lead. The caller holds smu.
func (pr *peer) dropSegs() {
	pr.seg = leadSeg{}
	clear(pr.segx) // (the caller's buffers)
	pr.segx = pr.segx[:0]
}

// moveLead moves the send lead to another path, sending again what the
// peer's host did not acknowledge. The caller holds smu (or the send gate
// with smu). It returns errNoMove, leaving the lead, when it cannot. A
// path whose connection refuses the lead frame before a byte of it went
// out is retired (and dialed again) and the next is tried; the old path
// is retired only once the frame went out. A lead frame cut short fails
// the pair: the peer may be joining a stream that never comes.
func (pr *peer) moveLead(why string) error {
	t := pr.t
	old := pr.sl
	acked, ok := pr.leadAcked()
	if !ok {
		return errNoMove
	}
	// The bytes from acked on: the copy, then the current Send's frame.
	bufs := pr.moveBufs[:0]
	defer func() { pr.moveBufs = bufs[:0] }()
	end := pr.llog.end
	if acked < end || !pr.seg.on {
		a, b, err := pr.llog.from(min(acked, end))
		if err != nil {
			if !pr.moveSaid {
				pr.moveSaid = true // once per lead
				t.log.Warn("tcp: first path stopped; the lead stream cannot move", "peer", pr.rank, "path", old.path.idx, "err", err)
			}
			return errNoMove
		}
		bufs = append(bufs, a, b)
	}
	if pr.seg.on {
		if pr.seg.at != end || pr.seg.extra {
			return errNoMove
		}
		for i := -1; i < len(pr.segx); i++ {
			s := &pr.seg
			if i >= 0 {
				s = &pr.segx[i]
			}
			frame := [2][]byte{s.hdr[:], s.part}
			at := s.at
			for _, b := range frame {
				if acked >= at+uint64(len(b)) {
					at += uint64(len(b))
					continue
				}
				from := uint64(0)
				if acked > at {
					from = acked - at
				}
				bufs = append(bufs, b[from:])
				at += uint64(len(b))
			}
		}
	}
	var n uint64
	for _, b := range bufs {
		n += uint64(len(b))
	}
	var next *conn
	var at uint64     // next's stream offset of the lead frame
	cutShort := false // the lead frame went out in part: next takes nothing either
	for {
		// The first path in use whose first connection does not
		// look stopped too (links that go down together), else the
		// first in use.
		// The path the peer moved its own lead onto delivers, at
		// least towards this rank: it comes first.
		next = nil
		var first *conn
		to := pr.pathOf(int(pr.sto.Load()) - 1)
		for i := -1; i < len(pr.paths); i++ {
			p := to
			if i >= 0 {
				p = pr.paths[i]
			}
			if p == nil || p == old.path || p.retired.Load() || acked < p.toldAt {
				// (A generation whose rejoin frame may not have
				// reached the peer: it would not look there for the
				// lead frame, which carries that rejoin frame in its
				// replay.)
				continue
			}
			c := pr.sview[p.conns[0].pos]
			if first == nil {
				first = c
			}
			if unacked, blocked, ackAge, ok := sendState(c); !ok || !unacked || !blocked || ackAge < t.stallAfter/2 {
				next = c
				break
			}
		}
		if next == nil {
			next = first
		}
		if next == nil {
			return errNoMove
		}
		if hook := t.testMoveTo; hook != nil {
			hook(next)
		}
		h := wire.FrameHeader{Type: wire.FrameLead, Paths: 1 << old.path.idx, Offset: pr.slfrom, Total: acked, Len: n}
		var stop int64
		if cut := t.testCutMove; cut != nil {
			stop = cut(next)
		}
		var wn int64
		var err error
		at = next.wroteAt()
		if lose := t.testLoseMove; lose != nil && lose(next) {
			wn = next.lose(&h, slices.Concat(bufs...), 0)
		} else {
			// A path that takes nothing (its link went down with
			// the old lead's) does not hold the move for longer
			// than it takes to call a path stopped.
			next.nc.SetWriteDeadline(time.Now().Add(t.stallAfter))
			wn, err = next.writeBufs(&h, bufs, stop)
			next.nc.SetWriteDeadline(time.Time{})
		}
		if err == nil {
			break
		}
		if wn > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
			// Part of the frame is on its way: the lead moved onto
			// a path that stopped too. It moves on from there at
			// once, resuming where this move did (or further, if
			// the peer's host acknowledged some of it).
			cutShort = true
			break
		}
		if wn > 0 {
			return pr.fail(&errs.PeerError{Peer: pr.rank, Kind: errs.ErrPeerLost, Cause: fmt.Errorf(
				"tcp: moving the lead stream off stopped path %d: the lead frame was cut after %d bytes on path %d: %w",
				old.path.idx, wn, next.path.idx, err)})
		}
		// Nothing went out: the old lead still leads, and another
		// path is tried.
		pr.retire(next.path, "the lead stream could not move onto it", err)
	}
	old.retireWrite()
	old.path.retired.Store(true)
	t.log.Warn("tcp: first path stopped; the lead stream moves to another path and the stopped one is retired",
		"peer", pr.rank, "path", old.path.idx, "local", old.path.local, "remote", old.path.remote,
		"to", next.path.idx, "why", why, "resend", n)
	for _, c := range old.path.conns {
		pr.sview[c.pos].retireWrite()
	}
	pr.mu.Lock()
	used := pr.sgen[old.path.idx]
	pr.sl, pr.slOld = next, old
	pr.mu.Unlock()
	pr.send.setLead(next)
	// The lead stream goes on after the replay on next. The copy and
	// the Send's frames stay until the peer's host acknowledges them
	// there: if next stops too before it does, the lead moves again
	// from where this move resumed.
	pr.slres, pr.slcs, pr.slfrom = acked, at+wire.FrameHeaderSize, acked+n
	pr.llog.trim(acked)
	pr.moveSaid = false
	pr.sstalled.Store(cutShort)
	if cutShort {
		t.log.Warn("tcp: the lead stream's new path takes nothing either; the lead moves again",
			"peer", pr.rank, "path", next.path.idx, "local", next.path.local, "remote", next.path.remote)
	}
	pr.redial(old.path, used)
	return nil
}

// writeBufs writes a frame whose payload is the concatenation of bufs.
// With stop > 0 (testCutMove) it writes only the first stop bytes and
// fails, as a connection failing in the middle would.
func (c *conn) writeBufs(h *wire.FrameHeader, bufs [][]byte, stop int64) (int64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wbroken || c.wclosed {
		return 0, net.ErrClosed
	}
	c.leads = true // no ping after the lead frame (ping.go)
	h.MarshalTo(c.whdr[:])
	wb := make(net.Buffers, 0, len(bufs)+1) // a move is rare: allocating is fine
	wb = append(wb, c.whdr[:])
	for _, b := range bufs {
		if len(b) > 0 {
			wb = append(wb, b)
		}
	}
	if stop > 0 {
		var cut net.Buffers
		for _, b := range wb {
			if stop == 0 {
				break
			}
			b = b[:min(int64(len(b)), stop)]
			stop -= int64(len(b))
			cut = append(cut, b)
		}
		n, err := cut.WriteTo(c.nc)
		c.wrote += uint64(n)
		if err == nil {
			err = errors.New("tcp: the write was cut (test)")
		}
		c.wbroken = true
		return n, err
	}
	n, err := wb.WriteTo(c.nc)
	c.wrote += uint64(n)
	if err != nil && n > 0 {
		c.wbroken = true
	}
	return n, err
}

// woken handles an interrupted read of the receive lead: a wake-up (a
// worker's, or the watch's for a lead frame) rather than a failure. It
// reports whether the read should go on, and moves the lead if a lead
// frame waits. The caller holds the receive gate and the lead's rmu.
func (pr *peer) woken(ctx context.Context, err error) (bool, error) {
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || pr.t.callErr(ctx, pr, err) != nil {
		return false, nil
	}
	pr.recv.restoreLead()
	if pr.rmove.Swap(false) {
		return true, pr.joinLead()
	}
	return true, nil
}

// joinLead moves the receive lead to the connection where a lead frame
// waits, if one does: the new lead reads the rest of the old stream, then
// the replay less what was read twice, then its own stream. Offsets count
// the lead stream's bytes across moves, so a frame leaving a lead this
// rank never joined (its lead frame lost with its path, the lead having
// moved again) joins the lead this rank reads, if it resumes within what
// that one holds: the lead it left is then never read as a lead
// (leadLeft). A frame that resumes past what the lead this rank reads
// holds, leaving another lead whose frame may still come, waits for that
// one to be joined first. The caller holds the receive gate and the old
// lead's rmu; the new lead's rmu stays held until the receive ends (see
// Recv).
func (pr *peer) joinLead() error {
	old := pr.rl
	var err error
	pr.candidates(func(c *conn) bool {
		c.rmu.Lock()
		h, pings, ok := c.peekFront()
		if !ok || h.Type != wire.FrameLead {
			c.rmu.Unlock()
			return false
		}
		// (A lead frame has no flags: wire refuses them.)
		left := pr.pathOf(bits.TrailingZeros16(h.Paths))
		if left == nil || left == c.path {
			c.rmu.Unlock()
			err = fmt.Errorf("rank %d moved the lead stream off paths %#x; it is on path %d: %w", pr.rank, h.Paths, old.path.idx, errProtocol)
			return true
		}
		q, ok := old.front.queued()
		if !ok {
			c.rmu.Unlock()
			err = fmt.Errorf("tcp: cannot tell what the old lead stream from rank %d holds", pr.rank)
			return true
		}
		read := old.leadRead()
		take, skip, rerr := resume(read, old.leadHeld(uint64(q))-read, h.Total, h.Len)
		var mid *conn
		if left != old.path {
			mid = pr.rview[left.conns[0].pos]
			switch {
			case rerr == nil:
			case h.Total+h.Len <= read:
				// A move this rank joined a later one of already
				// (this frame's lead was left without it).
				c.leadLeft.Store(true)
				c.rmu.Unlock()
				return false
			case h.Total > read && mid != pr.rlOld && !mid.leadLeft.Load():
				// The lead it leaves may still bring its own frame.
				c.rmu.Unlock()
				return false
			}
		}
		if rerr != nil {
			c.rmu.Unlock()
			err = rerr
			return true
		}
		if c.peeked {
			c.peeked = false
		} else {
			for range pings + 1 { // the pings before it (ping.go), then it
				if _, rerr := io.ReadFull(c, c.rhdr[:]); rerr != nil {
					c.rmu.Unlock()
					err = rerr
					return true
				}
			}
		}
		c.prev, c.prevLeft, c.skip, c.replayLeft = old, take, skip, h.Len-skip
		c.lres, c.lcs = h.Total, c.rread
		c.mid, c.midAt = nil, 0
		if mid != nil {
			// Replayed bytes from h.Offset on were written on the
			// lead this rank never joined.
			mid.leadLeft.Store(true)
			c.mid, c.midAt = mid, h.Offset
		}
		if take == 0 && skip == 0 && h.Len == 0 {
			c.prev = nil
		}
		// A header begun on the old stream is finished on the new.
		c.rhdr, c.rhn = old.rhdr, old.rhn
		c.peek, c.peeked = old.peek, old.peeked
		old.rhn, old.peeked = 0, false
		if old != pr.rentry {
			// A second move in one receive: the middle lead is
			// read only through c now.
			old.rmu.Unlock()
		}
		pr.mu.Lock()
		pr.rl, pr.rlOld = c, old
		follow := pr.sl.path == old.path || pr.sl.path == left
		pr.mu.Unlock()
		pr.recv.setLead(c)
		pr.t.log.Warn("tcp: peer moved the lead stream off a stopped path",
			"peer", pr.rank, "path", left.idx, "local", left.local, "remote", left.remote, "to", c.path.idx)
		pr.sto.Store(int32(c.path.idx) + 1)
		if follow {
			// The peer found the path stopped: this end's send lead
			// on it moves too, at its next Send, rather than after
			// StallAfter of its own.
			pr.sfollow.Store(true)
			pr.sstalled.Store(true)
		}
		return true
	})
	return err
}

// leadWrite writes a frame on the send lead, keeping what a move of the
// lead would need: a small frame's copy, or a large one as the Send's
// frame (which the Send then waits to see acknowledged). A write the watch
// interrupted because the lead stalled moves the lead, and the frame goes
// with the move. The caller holds smu when the pair moves its lead.
func (pr *peer) leadWrite(ctx context.Context, h *wire.FrameHeader, part []byte) (int64, error) {
	c := pr.sl
	if !pr.leadOK {
		return c.write(h, part)
	}
	if size := wire.FrameHeaderSize + len(part); size <= leadCopyMax && !pr.seg.on {
		if err := pr.leadRoom(ctx, size); err != nil {
			return 0, err
		}
		c = pr.sl // leadRoom may have moved it
		c.log = pr.llog
	} else if !pr.seg.on {
		pr.seg = leadSeg{on: true, at: pr.llog.end, part: part}
		c.seghdr = &pr.seg.hdr
	} else {
		// Another frame in the Send (a repair): kept as well, so that
		// the lead can still move, if it follows the one before on the
		// stream.
		last := &pr.seg
		if k := len(pr.segx); k > 0 {
			last = &pr.segx[k-1]
		}
		at := last.end()
		if pr.leadAt(c.wroteAt()) != at || len(pr.segx) == cap(pr.segx) {
			pr.seg.extra = true
		} else {
			pr.segx = append(pr.segx, leadSeg{on: true, at: at, part: part})
			c.seghdr = &pr.segx[len(pr.segx)-1].hdr
		}
	}
	var n int64
	var err error
	if lost := pr.t.testLost; lost != nil && lost(c) {
		var cut int64
		if f := pr.t.testCutLost; f != nil {
			cut = f(c)
		}
		n = c.lose(h, part, cut)
	} else {
		n, err = c.write(h, part)
	}
	c.log, c.seghdr = nil, nil
	return n, pr.leadFailed(ctx, err)
}

// lose is write for a frame lost on the way (testLost): the copies are
// kept and the stream counted, but nothing goes on the socket beyond the
// frame's first cut bytes (testCutLost), as when a path stops in the
// middle of a frame.
func (c *conn) lose(h *wire.FrameHeader, part []byte, cut int64) int64 {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if h.Type == wire.FrameLead {
		c.leads = true
	}
	h.MarshalTo(c.whdr[:])
	if cut > 0 {
		k := min(cut, int64(len(c.whdr)))
		c.nc.Write(c.whdr[:k])
		if rest := min(cut-k, int64(len(part))); rest > 0 {
			c.nc.Write(part[:rest])
		}
	}
	if c.log != nil {
		c.log.add(c.whdr[:])
		c.log.add(part)
	}
	if c.seghdr != nil {
		*c.seghdr = c.whdr
	}
	n := int64(len(c.whdr) + len(part))
	c.wrote += uint64(n)
	return n
}

// leadFailed turns the failure of a write on the send lead into its move,
// when the watch found the lead stalled and interrupted the write; the
// frame is in what the move sends again.
func (pr *peer) leadFailed(ctx context.Context, err error) error {
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || pr.t.callErr(ctx, pr, err) != nil || !pr.sstalled.Load() {
		return err
	}
	if merr := pr.moveLead("no acknowledgement during a send"); merr != nil {
		return err
	}
	pr.send.arm(len(pr.conns))
	return nil
}

// leadHeader reads the next frame header on the receive lead, going on
// after wake-ups and moving the lead when a lead frame waits. early
// reports that the header was written while an older lead led (it came
// from the old stream or the replay). poll asks for a polled read.
func (pr *peer) leadHeader(ctx context.Context, poll bool, fp *wire.Fingerprint, p []byte) (h wire.FrameHeader, n int, early bool, err error) {
	c := pr.rl
	early = c.replayAhead()
	pr.rhdrWait.Store(pr.leadOK)
	defer pr.rhdrWait.Store(false)
	for {
		var m int
		h, m, err = c.readHeader(pr.rank, poll)
		n += m
		again, jerr := pr.woken(ctx, err)
		if !again {
			return h, n, early, err
		}
		if jerr == nil && pr.rstripe.Swap(false) && pr.rl == c {
			switch {
			case n == 0 && c.idle():
				// (Not while the lead has bytes to read: the header
				// may be there, and a stripe read first may never
				// end if its own path stopped under it.)
				jerr = pr.preRead(ctx, fp, p, pr.rkeep.Swap(false))
			case (n > 0 || c.rhn != 0) && pr.leadStill():
				// The lead stopped in the middle of a header: which
				// message it starts is not known yet, so a stripe
				// ahead is kept, and taken by its message's header
				// (useKept), this one's or a later one's.
				jerr = pr.preRead(ctx, nil, nil, true)
			}
		}
		if jerr != nil {
			return h, n, early, jerr
		}
		if pr.rl != c {
			c = pr.rl
			early = early || n > 0 || c.rhn > 0 || c.peeked || c.replayAhead()
		}
	}
}

// inlineStripe reads, from the receive lead, the stripe the sender put on
// it after the first stripe because its connection became the lead (see
// the top of this file), into buf.
func (pr *peer) inlineStripe(ctx context.Context, h *wire.FrameHeader, buf []byte) (int64, error) {
	var sh wire.FrameHeader
	var n int
	var err error
	for {
		var m int
		sh, m, err = pr.rl.readHeader(pr.rank, false)
		n += m
		again, jerr := pr.woken(ctx, err)
		if !again {
			break
		}
		if jerr != nil {
			return int64(n), jerr
		}
	}
	if err != nil {
		return int64(n), err
	}
	if sh.Type != wire.FrameStripe || sh.Fingerprint != h.Fingerprint || sh.Paths != 0 || sh.Offset+sh.Len > h.Total {
		return int64(n), fmt.Errorf("rank %d sent a %s frame of %d bytes at %d as the stripe after a moved first stripe of a %d-byte message: %w",
			pr.rank, sh.Type, sh.Len, sh.Offset, h.Total, errProtocol)
	}
	part := buf[sh.Offset : sh.Offset+sh.Len]
	m, err := pr.readWoken(ctx, part)
	n += m
	if err == nil {
		err = checkCRC(pr.rank, &sh, part)
	}
	if err == nil {
		pr.rext = append(pr.rext, extent{off: sh.Offset, len: sh.Len, pos: pr.rl.pos, repair: true, ok: true})
	}
	return int64(n), err
}
