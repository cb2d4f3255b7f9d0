package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// Failover between the paths of a pair.
//
// A large message is cut into stripes over the pair's paths; once written,
// a stripe lives only in its connection's socket, so a path that stops
// (link down, blackholed) would hold the message until the link came back
// or the connection's health bound (Config.DeadAfter) failed the pair.
// Instead, on a pair with several paths:
//
//   - The sender follows each stripe on a path other than conn 0's until
//     the peer's host has acknowledged all of it (TCP_INFO: nothing unsent
//     or in flight), before Send returns. A connection with data in flight
//     and no acknowledgement for Config.StallAfter (counted from the start
//     of the send), or whose write fails, stops its path: the path is
//     retired (its connections' sending sides are shut off and it carries
//     nothing more), and the stripes it carried of this message are sent
//     again on conn 0 as repairs (wire.FrameStripe naming the path), still
//     within this Send, so they follow the message's first stripe on conn 0
//     before anything else.
//   - The receiver, while the stripes of a message are not all in, watches
//     conn 0 for repairs: a repair interrupts the stripes of the paths it
//     names, which are then never read again, and its payload is placed by
//     its offset (a stripe that came after all is overwritten with the same
//     bytes). The retired path is also retired for this rank's own sends,
//     so both ends stop using it. A frame of the next message instead
//     means no repair is coming: it is put back for the next receive; so
//     does the end of conn 0's stream at a frame boundary (the sender
//     closed right after its last Send). A
//     repair that arrives after the message came whole is discarded.
//
// A stripe whose connection failed on the receiving side waits for its
// repair; if the next message comes first, the pair fails as before. Conn
// 0's own path is retired only by moving the lead stream off it (lead.go):
// a stripe on that path's other sockets that stops moves the lead first
// (stopPath), and goes again as a repair on the new lead, where the
// receiver, having joined the moved lead, watches for it. Where the lead
// cannot move, the pair stalls until the path comes back or DeadAfter
// fails the pair. A retired path is
// dialed again and comes back into use (redial.go). "Conn 0" below is the
// lead stream of the direction, where a move put it.

// Send-side stripe states, by connection (peer.sstate).
const (
	stripeNone    uint8 = iota // not followed
	stripeWriting              // handed to its worker
	stripeWritten              // in the kernel, acknowledgement awaited
	stripeAcked                // acknowledged by the peer's host
)

// extent is a stretch of a message received.
type extent struct {
	off, len uint64
	pos      int  // the connection it came on
	repair   bool // it came as a repair
	ok       bool
}

// setupFailover prepares pr's failover state once its connections are up.
func (pr *peer) setupFailover() {
	n := len(pr.conns)
	pr.sstate = make([]uint8, n)
	pr.soff = make([]uint64, n)
	pr.rext = make([]extent, 0, 2*n)
	pr.multi = len(pr.paths) > 1
	if pr.multi && pr.t.stallAfter > 0 {
		_, _, _, ok := sendState(pr.conns[0])
		pr.failover = ok
	}
	pr.stimer = time.NewTimer(time.Hour)
	pr.stimer.Stop()
	pr.newGen = make(chan struct{})
}

// checkStalls looks at the connections whose stripe of the current send is
// in state which, on paths outside skip: a connection with data the
// network does not take (in flight, or waiting while the peer's window is
// open) and no acknowledgement for StallAfter since the send started
// retires its path. It returns the paths it retired, and whether some stripe is still
// not acknowledged; stripes found acknowledged move to stripeAcked.
func (pr *peer) checkStalls(since time.Time, which uint8, skip uint16) (retired uint16, pending bool, err error) {
	now := time.Now()
	for pos, st := range pr.sstate {
		if st != which {
			continue
		}
		c := pr.sview[pos]
		bit := uint16(1) << c.path.idx
		if (skip|retired)&bit != 0 {
			continue
		}
		unacked, blocked, ackAge, ok := sendState(c)
		if !ok || !unacked {
			if which == stripeWritten {
				pr.sstate[pos] = stripeAcked
			}
			continue
		}
		last := now.Add(-ackAge)
		if last.Before(since) {
			last = since
		}
		if stalled := now.Sub(last); blocked && stalled >= pr.t.stallAfter {
			switch err = pr.stopPath(c.path, fmt.Sprintf("no acknowledgement for %v", stalled.Round(time.Millisecond)), nil); err {
			case nil:
				retired |= bit
				continue
			case errNoMove:
				// The lead's own path, and the lead cannot move:
				// the pair waits for the path, or for DeadAfter.
				if d := pr.t.deadAfter; d > 0 && stalled >= d {
					return retired, pending, pr.fail(pr.allStopped(c.path, stalled))
				}
				err = nil
			default:
				return retired, pending, err
			}
		}
		pending = true
	}
	return retired, pending, nil
}

// stopPath takes path p out of use for sending, as retire does; when p
// carries the send lead (a stripe on the lead's path's other sockets
// stopped), the lead moves off it first (lead.go), and errNoMove says it
// could not: p is then left in use. The caller holds smu if the pair
// moves its lead.
func (pr *peer) stopPath(p *path, why string, cause error) error {
	if pr.leadOK && p == pr.sl.path {
		if cause != nil {
			why += ": " + cause.Error()
		}
		return pr.moveLead("a stripe on the lead's path: " + why)
	}
	pr.retire(p, why, cause)
	return nil
}

// awaitAcks waits until every stripe of the current send written on a path
// outside retired is acknowledged, retiring the paths that stall. It
// returns the paths it retired.
func (pr *peer) awaitAcks(ctx context.Context, since time.Time, retired uint16) (uint16, error) {
	backoff := 20 * time.Microsecond
	var newly uint16
	for {
		r, pending, err := pr.checkStalls(since, stripeWritten, retired|newly)
		newly |= r
		if err != nil {
			return newly, err
		}
		if !pending {
			return newly, nil
		}
		if h := pr.t.testLeadAt; h != nil && pr.leadOK && pr.leadPathPending() {
			h("acks")
		}
		if pr.leadOK && pr.sstalled.Load() && pr.leadPathPending() {
			// The watch found the lead's first connection stalled
			// while a stripe on its path's other sockets waits: that
			// one may wait for good (the peer reads it only after the
			// message's header, on the stalled lead, and its window
			// fills while the path's other sockets still deliver).
			// The lead moves now, and the path's stripes go again as
			// repairs, as when that stripe stalls too.
			old := pr.sl.path
			if err := pr.leadStalled("send"); err != nil {
				return newly, err
			}
			if pr.sl.path != old {
				newly |= 1 << old.idx
				continue
			}
		}
		if err := pr.t.callErr(ctx, pr, nil); err != nil {
			return newly, err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Millisecond)
	}
}

// leadPathPending reports whether a stripe of the current send on the send
// lead's path (its other sockets) waits for acknowledgement. The caller
// holds smu.
func (pr *peer) leadPathPending() bool {
	for pos, st := range pr.sstate {
		if st == stripeWritten && pr.sview[pos].path == pr.sl.path {
			return true
		}
	}
	return false
}

// retire takes path p out of use for sending, interrupting a stripe being
// written on it; the first time, it logs why.
func (pr *peer) retire(p *path, why string, cause error) {
	for _, c := range p.conns {
		pr.sview[c.pos].retireWrite()
	}
	if p.retired.CompareAndSwap(false, true) {
		pr.t.log.Warn("tcp: path stopped; it is retired, and stripes in flight on it are sent again on the pair's lead stream",
			"peer", pr.rank, "path", p.idx, "local", p.local, "remote", p.remote, "why", why, "err", cause)
	}
	pr.mu.Lock()
	used := pr.sgen[p.idx]
	pr.mu.Unlock()
	pr.redial(p, used)
}

// repair sends again on conn 0 the stripes of the current send (message p
// under fp) that travelled on the paths in retired.
func (pr *peer) repair(ctx context.Context, fp *wire.Fingerprint, p []byte, retired uint16) (int64, error) {
	var moved int64
	for pos, st := range pr.sstate {
		if st == stripeNone {
			continue
		}
		bit := uint16(1) << pr.conns[pos].path.idx
		if retired&bit == 0 {
			continue
		}
		off, n := pr.soff[pos], pr.cut[pos]
		h := wire.FrameHeader{Type: wire.FrameStripe, Paths: bit, Len: n, Offset: off, Fingerprint: *fp}
		m, err := pr.leadWrite(ctx, &h, p[off:off+n])
		moved += m
		if err != nil {
			return moved, err
		}
		pr.sl.path.sent.Add(n)
	}
	return moved, nil
}

// checkRepair checks the paths a repair names: some, all in use, none
// conn 0's own.
func (pr *peer) checkRepair(h *wire.FrameHeader) error {
	if h.Paths == 0 || h.Paths&^pr.mask != 0 || h.Paths&(1<<pr.rl.path.idx) != 0 {
		return fmt.Errorf("rank %d sent a repair for paths %#x, the pair uses %#x and repairs go on path %d: %w",
			pr.rank, h.Paths, pr.mask, pr.rl.path.idx, errProtocol)
	}
	return nil
}

// retireRecv notes that the peer retired the paths in mask: their streams
// from the peer are out of step (never read again until the peer moves
// them to a new generation, see redial.go), and this rank stops sending on
// them too if it sends on the same connections.
func (pr *peer) retireRecv(mask uint16) {
	pr.rgone |= mask
	for _, p := range pr.paths {
		if mask&(1<<p.idx) == 0 {
			continue
		}
		pr.mu.Lock()
		used := pr.rgen[p.idx]
		same := pr.sgen[p.idx] == used
		pr.mu.Unlock()
		if same && p.retired.CompareAndSwap(false, true) {
			pr.t.log.Warn("tcp: peer retired a path; it is retired here too",
				"peer", pr.rank, "path", p.idx, "local", p.local, "remote", p.remote)
		}
		pr.redial(p, used)
	}
}

// staleRepair discards a repair read at a message boundary: its message
// came whole after all.
func (pr *peer) staleRepair(ctx context.Context, h *wire.FrameHeader) error {
	if err := pr.checkRepair(h); err != nil {
		return err
	}
	if h.Len > math.MaxInt64 {
		return fmt.Errorf("rank %d sent a repair of %d bytes: %w", pr.rank, h.Len, errProtocol)
	}
	pr.retireRecv(h.Paths)
	var scratch [4 << 10]byte
	for left := h.Len; left > 0; {
		n, err := pr.readWoken(ctx, scratch[:min(left, uint64(len(scratch)))])
		left -= uint64(n)
		if err != nil {
			return err
		}
	}
	return nil
}

// collectStripes gathers the answers of the workers receiving the stripes
// on parts of the message whose first stripe h announced, into buf. With
// watch, it meanwhile reads conn 0 for repairs (see the top of this file).
// err is the error the receive already met, if any; collectStripes returns
// it or the first it meets, and the bytes moved.
func (pr *peer) collectStripes(ctx context.Context, h *wire.FrameHeader, buf []byte, parts []*conn, watch bool, err error) (int64, error) {
	t := pr.t
	c0 := pr.rl
	var moved int64
	var failed, repaired uint16 // paths whose stripe failed here; paths repaired
	var failure error
	inlineDue, inlineRead := false, false
	left := len(parts)
	watching := watch && err == nil
	// The connections whose worker has answered: a repair must not wait
	// for them again (a worker answers once per message).
	var answered [MaxPaths * MaxSockets / 64]uint64
	take := func(r result) {
		left--
		answered[r.pos>>6] |= 1 << (r.pos & 63)
		if t.testTook != nil {
			t.testTook(r.pos, r.err)
		}
		c := pr.conns[r.pos]
		moved += r.n
		c.path.received.Add(r.len)
		bit := uint16(1) << c.path.idx
		switch {
		case repaired&bit != 0:
			// Interrupted for its repair.
		case r.err == errLeadMoved:
			// Its stripe comes on the lead stream (lead.go).
			inlineDue = !inlineRead
		case r.err == nil:
			pr.rext = append(pr.rext, extent{off: r.off, len: r.len, pos: r.pos, ok: true})
		case watch && connFailed(r.err) && t.callErr(ctx, pr, r.err) == nil:
			// The connection failed: wait for the repair.
			failed |= bit
			if failure == nil {
				failure = r.err
			}
		case err == nil:
			err = r.err
			pr.recv.interrupt()
		}
	}
	repairs := 0 // repairs still due: one per stripe of a repaired path
	var msgPaths uint16
	for _, c := range parts {
		msgPaths |= 1 << c.path.idx
	}
	for pos, c := range pr.conns {
		if pr.rpre&(1<<pos) != 0 {
			// A stripe read before the header (lead.go) is
			// repaired like the others if its path fails.
			msgPaths |= 1 << c.path.idx
		}
	}
	for {
		if left == 0 && (err != nil || !watching || repairs == 0 && failed&^repaired == 0) {
			// All in, or a failed stripe whose repair will not come.
			break
		}
		if left > 0 && (!watching || pr.rwait.Load() == 0) {
			take(<-pr.rdone)
			continue
		}
		h2, werr := pr.watchRepairs(c0, left > 0)
		switch {
		case werr != nil:
			if again, jerr := pr.woken(ctx, werr); again {
				// Woken: the stripes are in, or the lead moved.
				c0 = pr.rl
				if jerr != nil {
					err, watching = jerr, false
					pr.recv.interrupt()
				}
				continue
			}
			if errors.Is(werr, io.EOF) && c0.rhn == 0 && repairs == 0 {
				// (A polled read wraps the end of the stream in a
				// *net.OpError; one cut mid-frame is
				// io.ErrUnexpectedEOF, not this.)
				// The sender closed conn 0 at a frame boundary
				// after this message's first stripe: no repair
				// will come, and the stripes on the other paths
				// are still to be read (a peer that closes right
				// after its last Send). The next receive on conn
				// 0 meets the end of the stream again.
				watching = false
				break
			}
			err, watching = werr, false
			pr.recv.interrupt()
		case h2.Type == wire.FrameStripe && h2.Paths != 0 && h2.Len == 0 && repairs == 0:
			// Not a repair (a repair carries bytes): the notice of
			// paths the sender's pinger retired, opening its next
			// Send (ping.go). This message is done; the next
			// receive takes it (staleRepair).
			c0.unread(&h2)
			watching = false
		case h2.Type == wire.FrameStripe && h2.Paths != 0:
			if werr := pr.checkRepair(&h2); werr != nil {
				err, watching = werr, false
				pr.recv.interrupt()
				break
			}
			if h2.Fingerprint != h.Fingerprint || h2.Offset+h2.Len > h.Total {
				err, watching = fmt.Errorf("rank %d sent a repair of %d bytes at %d of %v, the message is %d bytes of %v: %w",
					pr.rank, h2.Len, h2.Offset, h2.Fingerprint, h.Total, h.Fingerprint, errProtocol), false
				pr.recv.interrupt()
				break
			}
			if h2.Paths&^msgPaths != 0 {
				err, watching = fmt.Errorf("rank %d sent a repair for paths %#x, the message travels on %#x: %w", pr.rank, h2.Paths, msgPaths, errProtocol), false
				pr.recv.interrupt()
				break
			}
			if newly := h2.Paths &^ repaired; newly != 0 {
				// Stop the stripes the repairs replace before
				// their bytes are overwritten.
				repaired |= newly
				waitFor := 0
				for _, c := range parts {
					if newly&(1<<c.path.idx) == 0 {
						continue
					}
					repairs++
					if answered[c.pos>>6]&(1<<(c.pos&63)) == 0 {
						pr.recv.poke(c.pos)
						waitFor++
					}
				}
				for pos, c := range pr.conns {
					if pr.rpre&(1<<pos) != 0 && newly&(1<<c.path.idx) != 0 {
						repairs++ // read already: nothing to stop
					}
				}
				answered := 0
				for answered < waitFor {
					// Answers of other stripes may come between.
					r := <-pr.rdone
					if newly&(1<<pr.conns[r.pos].path.idx) != 0 {
						answered++
					}
					take(r)
				}
				pr.retireRecv(newly)
			}
			if repairs == 0 {
				err, watching = fmt.Errorf("rank %d sent more repairs than the message has stripes on paths %#x: %w", pr.rank, repaired, errProtocol), false
				pr.recv.interrupt()
				break
			}
			m, rerr := pr.readWoken(ctx, buf[h2.Offset:h2.Offset+h2.Len])
			moved += int64(m)
			c0.path.received.Add(uint64(m))
			if rerr == nil {
				rerr = checkCRC(pr.rank, &h2, buf[h2.Offset:h2.Offset+h2.Len])
			}
			if rerr != nil {
				err, watching = rerr, false
				pr.recv.interrupt()
				break
			}
			pr.rext = append(pr.rext, extent{off: h2.Offset, len: h2.Len, repair: true, ok: true})
			repairs--
		case repairs > 0:
			err, watching = fmt.Errorf("rank %d sent a %s frame where %d more repairs were due: %w", pr.rank, h2.Type, repairs, errProtocol), false
			pr.recv.interrupt()
		case h2.Type == wire.FrameStripe && h2.Paths == 0 && !inlineRead && h2.Fingerprint == h.Fingerprint && hasPart(parts, c0.pos):
			// The stripe of the connection the lead moved onto, on
			// the lead stream after the first stripe (lead.go):
			// repairs may follow it, for the stripes of the path the
			// lead left when that path had other sockets.
			c0.unread(&h2)
			m, rerr := pr.inlineStripe(ctx, h, buf)
			moved += m
			if rerr != nil {
				err, watching = rerr, false
				pr.recv.interrupt()
				break
			}
			inlineRead, inlineDue = true, false
		default:
			// The next frame: the sender is done with this message.
			c0.unread(&h2)
			watching = false
		}
	}
	if err == nil && inlineDue {
		var m int64
		m, err = pr.inlineStripe(ctx, h, buf)
		moved += m
	}
	if err != nil {
		return moved, err
	}
	if failed&^repaired != 0 {
		return moved, failure
	}
	return moved, pr.checkCover(h, repaired)
}

// hasPart reports whether one of parts is at position pos.
func hasPart(parts []*conn, pos int) bool {
	for _, c := range parts {
		if c.pos == pos {
			return true
		}
	}
	return false
}

// connFailed reports whether err, met by a stripe's worker, is its
// connection failing (rather than the peer breaking the protocol or
// aborting), which a repair may make up for.
func connFailed(err error) bool {
	var pe *errs.PeerError
	return !errors.Is(err, errProtocol) && !errors.As(err, &pe)
}

// readWoken fills b from c like io.ReadFull, going on after the wake-up a
// worker gives the receive's watch on conn 0 (see worker.run).
func (pr *peer) readWoken(ctx context.Context, b []byte) (int, error) {
	got := 0
	for {
		n, err := io.ReadFull(pr.rl, b[got:])
		got += n
		if again, jerr := pr.woken(ctx, err); again {
			if jerr == nil && pr.rstripe.Swap(false) && pr.rbody.Load() && pr.leadStill() {
				// A stripe waits ahead of a lead frame while the
				// lead stopped in the middle of a message's first
				// frame (lead.go).
				jerr = pr.preRead(ctx, nil, nil, true)
			}
			if jerr != nil {
				return got, jerr
			}
			continue
		}
		return got, err
	}
}

// checkCover checks that the stripes received (pr.rext, those of the
// repaired paths left out) and the first one, h's, lie end to end over
// the whole message.
func (pr *peer) checkCover(h *wire.FrameHeader, repaired uint16) error {
	ext := pr.rext
	n := 0
	for _, e := range ext {
		if e.len > 0 && (e.repair || repaired&(1<<pr.conns[e.pos].path.idx) == 0) {
			ext[n] = e
			n++
		}
	}
	if h.Len > 0 {
		// (A first stripe may be empty, when its path's share is.)
		ext = append(ext, extent{})
		ext = ext[:n+1]
		ext[n] = extent{off: 0, len: h.Len, ok: true}
	} else {
		ext = ext[:n]
	}
	// Insertion sort: a handful of stripes, and no allocation.
	for i := 1; i < len(ext); i++ {
		for j := i; j > 0 && ext[j].off < ext[j-1].off; j-- {
			ext[j], ext[j-1] = ext[j-1], ext[j]
		}
	}
	end := uint64(0)
	for _, e := range ext {
		if e.off != end {
			return fmt.Errorf("rank %d's stripes of a %d-byte message leave a gap or overlap at byte %d: %w", pr.rank, h.Total, end, errProtocol)
		}
		end += e.len
	}
	pr.rext = ext[:0]
	if end != h.Total {
		return fmt.Errorf("rank %d's stripes of a %d-byte message add up to %d bytes: %w", pr.rank, h.Total, end, errProtocol)
	}
	return nil
}
