package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hcomm-go/hcomm/internal/wire"
)

// Idle pings.
//
// A path carries stripes only while large messages are sent; between them
// (or in a job of small messages) a link that goes down is noticed only by
// the next striped Send, which then stalls for StallAfter before the path
// is retired, or by keepalive after DeadAfter/2. So each end of a pair with
// several paths pings, every PingEvery, each connection of its paths other
// than the first (connection 0's, which is not failed over) that has
// nothing in flight, with a header-only frame (wire.FramePing) the
// receiver skips. A connection whose ping the peer's host has not
// acknowledged for StallAfter retires its path, as a stalled stripe does
// (WARN "path stopped", then the dialer dials it again); the peer retires
// its own sends when its pings stall too. The pinger works only between
// Sends (peer.sidle), so it never writes beside a stripe of this rank.
//
// Pings a receiver does not read stay in its socket buffer until the next
// stripe on that connection is read; so they do not pile up while a pair
// sends only small messages, the pinger also discards, without waiting,
// whole ping frames at the head of its receiving connections that no
// receive is reading (drainPings).

// pingLoop pings the pair's idle paths until the pair fails or the
// transport closes.
func (pr *peer) pingLoop() {
	t := pr.t
	pr.pinged = make([]time.Time, len(pr.conns))
	tick := time.NewTicker(t.pingEvery)
	defer tick.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-pr.failed:
			return
		case now := <-tick.C:
			pr.pingOnce(now)
			if h := t.testPinged; h != nil {
				h(pr.rank)
			}
		}
	}
}

// pingOnce checks and pings the pair's idle paths once, unless a Send is in
// progress, and discards the pings the peer sent that no receive reads.
func (pr *peer) pingOnce(now time.Time) {
	t := pr.t
	first := pr.conns[0].path
	pr.mu.Lock()
	sl := pr.sl
	pr.mu.Unlock()
	if pr.sidle.TryLock() {
		for _, p := range pr.paths {
			if p == first || p.retired.Load() {
				continue
			}
			for _, id := range p.conns {
				c := pr.sview[id.pos]
				if c == sl {
					continue // the lead stream moved here (lead.go)
				}
				unacked, blocked, ackAge, ok := sendState(c)
				if !ok {
					continue
				}
				if h := t.testPingStall; h != nil && h(c) {
					pr.retire(p, "idle ping got no acknowledgement (test)", nil)
					pr.untold |= 1 << p.idx
					break
				}
				if unacked {
					at := pr.pinged[id.pos]
					if at.IsZero() || !blocked {
						continue
					}
					last := now.Add(-ackAge)
					if last.Before(at) {
						last = at
					}
					if stalled := now.Sub(last); stalled >= t.stallAfter {
						pr.retire(p, fmt.Sprintf("idle ping got no acknowledgement for %v", stalled.Round(time.Millisecond)), nil)
						pr.untold |= 1 << p.idx
						break
					}
					continue
				}
				if err := c.writePing(); err == errLeads {
					continue // the lead stream moved here meanwhile
				} else if err != nil {
					pr.retire(p, "idle ping failed", err)
					pr.untold |= 1 << p.idx
					break
				}
				pr.pinged[id.pos] = now
			}
		}
		pr.sidle.Unlock()
	}
	for _, p := range pr.paths {
		if p == first || p.absent.Load() {
			continue
		}
		for _, id := range p.conns {
			pr.mu.Lock()
			c, lead := pr.rview[id.pos], pr.rl
			pr.mu.Unlock()
			if c == lead || !c.rmu.TryLock() {
				continue // a receive reads it, or the lead stream moved here (lead.go)
			}
			c.drainPings()
			c.rmu.Unlock()
		}
	}
}

// tellRetired tells the peer, on the send lead, which paths the pinger
// retired since the last Send: a repair of no bytes naming them (a repair
// always carries some), under the fingerprint of the Send about to go,
// fp. The peer takes it between messages (as a repair of a message that
// came whole: failover.go) and retires its own sends on those paths at
// once, rather than when its own pings or stripes there stall. A path the
// send lead is on now is left out (it is not retired: the lead moved onto
// it). The caller holds sidle, at the start of a Send.
func (pr *peer) tellRetired(ctx context.Context, fp *wire.Fingerprint) error {
	mask := pr.untold &^ (1 << pr.sl.path.idx)
	pr.untold = 0
	if mask == 0 {
		return nil
	}
	h := wire.FrameHeader{Type: wire.FrameStripe, Paths: mask, Fingerprint: *fp}
	_, err := pr.leadWrite(ctx, &h, nil)
	return err
}

// errLeads is writePing's answer on a connection the send lead moved onto.
var errLeads = errors.New("tcp: the lead stream moved onto the connection")

// writePing writes a ping frame on c, unless the send lead moved onto c
// (lead.go): a ping after the lead frame would be in no replay copy. The
// move marks c under wmu, so none comes between the check and the write.
func (c *conn) writePing() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.leads {
		return errLeads
	}
	if c.wbroken || c.wclosed {
		return net.ErrClosed
	}
	h := wire.FrameHeader{Type: wire.FramePing}
	h.MarshalTo(c.whdr[:])
	n, err := c.nc.Write(c.whdr[:])
	c.wrote += uint64(n)
	if err != nil && n > 0 {
		c.wbroken = true
	}
	return err
}

// drainPings discards the whole ping frames at the head of c's stream that
// no receive reads, if its reader is between frames, counting them as
// read: the peer counts them as written, and a move of the lead stream
// onto c and off it again resumes by that count (lead.go). The caller
// holds rmu.
func (c *conn) drainPings() {
	if !c.draining && !c.peeked && c.rhn == 0 && c.aoff == c.aend && c.prev == nil {
		c.rread += uint64(c.front.drainPings())
	}
}
