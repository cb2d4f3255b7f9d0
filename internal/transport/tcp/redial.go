package tcp

import (
	"context"
	"fmt"
	"math/bits"
	"net"
	"os"
	"time"

	"github.com/hcomm-go/hcomm/internal/wire"
)

// Dialing a retired path again.
//
// A path retired for stalling (see failover.go) is out of step: either end
// may still hold bytes of a stripe in the old connections' buffers, so
// they are never used again. Instead the pair's dialer connects the path
// again, with backoff for as long as the link stays down, as a new
// generation (wire.Handshake.Gen: 1, 2, ... up to wire.MaxGen), which the
// listener takes beside the old connections rather than refusing as
// duplicates. Each direction of each end moves to a generation on its own,
// between messages:
//
//   - A sender, at the start of a striped Send, finds a complete
//     generation newer than the one it sends on, moves its sends on the
//     path to it and tells the receiver with a rejoin frame on connection
//     0 (wire.FrameRejoin, naming the path and the generation), before the
//     message. The path is back in the plan with a small share
//     (rejoinShare, 1/16) that grows with the throughput measured on it.
//   - A receiver reads stripes of a path only on the connections of the
//     generation its peer last announced: a rejoin frame, read between
//     messages, moves its reads of the path to that generation (waiting
//     for it to be connected at this end too). So a stripe is never read
//     from the old connection of a replaced path.
//
// A peer's repair of a path retires this end's sending on it only when this
// end sends on the generation the repair concerns (the one it receives
// on); a repair of an older generation than the one it sends on changes
// nothing. Connections of a generation neither direction uses any more
// are closed.

// A path that did not connect when the pair did (an address that gave no
// answer within the grace, or whose first connection request was lost) is
// not dropped for the job: both ends keep it as an absent path, retired
// from the start, with placeholder connections, and the dialer keeps
// dialing it in the background at a low rate (reprobeMin, doubling up to
// reprobeMax) as generation 1, 2, ... of its connections. Once one is up,
// it joins as a re-dialed path does, through the rejoin frame.

// Backoff between attempts to dial an absent path.
const (
	reprobeMin = time.Second
	reprobeMax = 8 * time.Second
)

// Backoff between attempts to dial a retired path, and the bound of one
// attempt.
const (
	redialMin     = 50 * time.Millisecond
	redialMax     = time.Second
	redialAttempt = 2 * time.Second
)

// A path retired again after it came back waits before it is dialed
// again: redialHold the second time, four times longer each time after,
// up to redialHoldMax, so a link that connects but does not carry data
// costs the pair a stall now and then rather than at every message.
const (
	redialHold    = 250 * time.Millisecond
	redialHoldMax = 10 * time.Second
)

// A generation is a path's connections dialed again.
type generation struct {
	path  *path
	gen   uint8
	conns []*conn // by slot, nil until connected
	have  int
}

func (g *generation) complete() bool { return g.have == len(g.conns) }

// pathOf returns the pair's path with listener address index k, or nil.
func (pr *peer) pathOf(k int) *path {
	for _, p := range pr.paths {
		if p.idx == k {
			return p
		}
	}
	return nil
}

// findGen returns generation gen of path k, or nil. The caller holds mu.
func (pr *peer) findGen(k int, gen uint8) *generation {
	for _, g := range pr.gens {
		if g.path.idx == k && g.gen == gen {
			return g
		}
	}
	return nil
}

// lastGen returns the newest generation of path k, complete or not, and
// the newest complete one (nil if none). The caller holds mu.
func (pr *peer) lastGen(k int) (last uint8, done *generation) {
	last = max(pr.sgen[k], pr.rgen[k])
	for _, g := range pr.gens {
		if g.path.idx != k {
			continue
		}
		last = max(last, g.gen)
		if g.complete() && (done == nil || g.gen > done.gen) {
			done = g
		}
	}
	return last, done
}

// addAbsent adds to the pair, retired, every path of the listener's
// addresses not in pr.mask, with placeholder connections, and puts them
// in the mask: both ends of the pair then agree on the layout, and an
// absent path can join later as a path dialed again. addrs is the
// listener's addresses (nil at the listener). The caller holds mu, once
// all connections are in.
func (pr *peer) addAbsent(addrs []string) {
	t := pr.t
	npaths := len(pr.slots) / t.nsocks
	for k := range npaths {
		if pr.mask&(1<<k) != 0 {
			continue
		}
		p := &path{idx: k}
		if k < len(addrs) {
			p.remote = addrs[k]
		}
		p.retired.Store(true)
		p.absent.Store(true)
		for s := range t.nsocks {
			c := &conn{nc: absentConn{}, idx: k*t.nsocks + s, crc: t.crc, path: p, pos: len(pr.conns)}
			p.conns = append(p.conns, c)
			pr.conns = append(pr.conns, c)
		}
		pr.paths = append(pr.paths, p)
		pr.mask |= 1 << k
	}
}

// probeAbsent dials the absent paths found not to answer (pr.reprobe) in
// the background, once the pair is connected.
func (pr *peer) probeAbsent() {
	for _, p := range pr.paths {
		if pr.reprobe&(1<<p.idx) != 0 && p.absent.Load() {
			pr.redial(p, 0)
		}
	}
}

// absentConn stands for a connection of an absent path: nothing is sent
// or received on it (the path is retired); every call fails.
type absentConn struct{}

func (absentConn) Read([]byte) (int, error)         { return 0, net.ErrClosed }
func (absentConn) Write([]byte) (int, error)        { return 0, net.ErrClosed }
func (absentConn) Close() error                     { return nil }
func (absentConn) LocalAddr() net.Addr              { return absentAddr{} }
func (absentConn) RemoteAddr() net.Addr             { return absentAddr{} }
func (absentConn) SetDeadline(time.Time) error      { return nil }
func (absentConn) SetReadDeadline(time.Time) error  { return nil }
func (absentConn) SetWriteDeadline(time.Time) error { return nil }

type absentAddr struct{}

func (absentAddr) Network() string { return "tcp" }
func (absentAddr) String() string  { return "absent" }

// redial starts dialing path p again, if this rank is the pair's dialer,
// no generation newer than used (the one that was retired) exists, and no
// dialing of it is under way.
func (pr *peer) redial(p *path, used uint8) {
	t := pr.t
	if pr.rank < t.rank || t.ctx.Err() != nil {
		return
	}
	pr.mu.Lock()
	last, _ := pr.lastGen(p.idx)
	if p.redialing || last > used || last == wire.MaxGen {
		pr.mu.Unlock()
		return
	}
	p.redialing = true
	var hold time.Duration
	if p.redials > 0 {
		hold = redialHold << min(2*(p.redials-1), 10)
		hold = min(hold, redialHoldMax)
	}
	p.redials++
	pr.mu.Unlock()
	t.spawn(func() { pr.redialLoop(p, hold) })
}

// redialLoop dials path p again, after hold, until a new generation of its
// connections is up, the pair fails or the transport closes.
func (pr *peer) redialLoop(p *path, hold time.Duration) {
	t := pr.t
	defer func() {
		pr.mu.Lock()
		p.redialing = false
		pr.mu.Unlock()
	}()
	if !pr.wait(hold) {
		return
	}
	backoff, most := redialMin, redialMax
	absent := p.absent.Load()
	if absent {
		backoff, most = min(reprobeMin, t.reprobeMax), t.reprobeMax
		t.log.Info("tcp: dialing a dropped path again in the background", "peer", pr.rank, "path", p.idx, "remote", p.remote)
	}
	for attempt := 0; ; attempt++ {
		pr.mu.Lock()
		last, _ := pr.lastGen(p.idx)
		last = max(last, p.lost)
		pr.mu.Unlock()
		if last == wire.MaxGen {
			t.log.Warn("tcp: path retired too often; not dialed again", "peer", pr.rank, "path", p.idx, "remote", p.remote)
			return
		}
		reached, err := pr.dialGen(p, last+1)
		if err == nil {
			return
		}
		if reached {
			pr.loseGen(p, last+1)
		}
		if attempt == 0 && !absent {
			t.log.Info("tcp: dialing a retired path again", "peer", pr.rank, "path", p.idx, "remote", p.remote, "err", err)
		}
		if !pr.wait(backoff) {
			return
		}
		backoff = min(2*backoff, most)
	}
}

// wait waits for d, and reports false if the pair failed or the transport
// closed meanwhile.
func (pr *peer) wait(d time.Duration) bool {
	t := pr.t
	if d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-t.ctx.Done():
		case <-pr.failed:
		case <-timer.C:
		}
		timer.Stop()
	}
	return t.ctx.Err() == nil && pr.err() == nil
}

// dialGen connects the sockets of generation gen of path p. reached
// reports that a connection of it got as far as the listener, which may
// then have taken the generation whole though the dial failed here (its
// answer came after the attempt's bound, or it refused a generation it
// holds).
func (pr *peer) dialGen(p *path, gen uint8) (reached bool, err error) {
	t := pr.t
	addrs := t.paths[pr.rank]
	addr := addrs[p.idx]
	late := t.testRedial != nil && t.testRedial(p.idx, gen)
	for s := range t.nsocks {
		i := p.idx*t.nsocks + s
		ctx, cancel := context.WithTimeout(t.ctx, redialAttempt)
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			reached = true
			err = t.clientHandshake(ctx, nc, pr.rank, addr, i, len(addrs), pr.mask, gen)
			if err == nil && late {
				err = fmt.Errorf("tcp: test: the answer for generation %d came too late: %w", gen, os.ErrDeadlineExceeded)
			}
			if err != nil {
				nc.Close()
			}
		}
		cancel()
		if err != nil {
			return reached, err
		}
		if !pr.addGen(p, s, gen, nc) {
			return reached, net.ErrClosed
		}
	}
	return reached, nil
}

// loseGen notes that this end will never have generation gen of path p
// (its dialing failed after reaching the listener) and wakes a receive
// waiting for it (rejoinRecv).
func (pr *peer) loseGen(p *path, gen uint8) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	p.lost = max(p.lost, gen)
	close(pr.newGen)
	pr.newGen = make(chan struct{})
}

// checkGen says why connection i of generation gen, dialed by the peer,
// cannot join, or "" if it can.
func (pr *peer) checkGen(i int, gen uint8) string {
	select {
	case <-pr.ready:
	default:
		return fmt.Sprintf("rank %d dialed a path again (socket %d, generation %d) before the pair was connected", pr.rank, i, gen)
	}
	k, slot := i/pr.t.nsocks, i%pr.t.nsocks
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed || pr.err() != nil {
		return fmt.Sprintf("rank %d is no longer connectable", pr.rank)
	}
	if pr.mask&(1<<k) == 0 || !pr.leadOK && k == pr.conns[0].path.idx {
		return fmt.Sprintf("rank %d dialed path %d again, which the pair does not use or never retires", pr.rank, k)
	}
	if k == pr.sl.path.idx && k == pr.rl.path.idx {
		// Both lead streams still use it here (lead.go): not
		// retired yet at this end.
		return fmt.Sprintf("rank %d dialed path %d again, which both lead streams use", pr.rank, k)
	}
	_, done := pr.lastGen(k)
	if done != nil && gen <= done.gen || gen <= max(pr.sgen[k], pr.rgen[k]) {
		return fmt.Sprintf("rank %d dialed generation %d of path %d, which is out of date", pr.rank, gen, k)
	}
	if g := pr.findGen(k, gen); g != nil && g.conns[slot] != nil {
		return fmt.Sprintf("rank %d is already connected on socket %d of generation %d", pr.rank, i, gen)
	}
	return ""
}

// acceptGen admits nc, whose dialer proved itself with h, as a connection
// of a generation of a path dialed again, or refuses it. It reports
// whether nc joined the pair.
func (t *Transport) acceptGen(nc net.Conn, pr *peer, h *wire.Handshake, nonce *[wire.NonceSize]byte, remote string) bool {
	i := int(h.Socket)
	if reason := pr.checkGen(i, h.Gen); reason != "" {
		t.refusals.note(remote, int(h.Rank), reason)
		t.answer(nc, h, nonce, wire.ReplyRefuse, reason)
		return false
	}
	if err := t.answer(nc, h, nonce, wire.ReplyAccept, ""); err != nil {
		t.log.Warn("tcp: lost connection during handshake", "remote", remote, "peer", pr.rank, "err", err)
		return false
	}
	nc.SetDeadline(time.Time{})
	return pr.addGen(pr.pathOf(i/t.nsocks), i%t.nsocks, h.Gen, nc)
}

// addGen installs nc as socket slot of generation gen of path p. Once the
// generation is complete, senders may move to it. It reports false,
// closing nc, if it cannot.
func (pr *peer) addGen(p *path, slot int, gen uint8, nc net.Conn) bool {
	t := pr.t
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed || p == nil {
		nc.Close()
		return false
	}
	g := pr.findGen(p.idx, gen)
	if g == nil {
		g = &generation{path: p, gen: gen, conns: make([]*conn, t.nsocks)}
		pr.gens = append(pr.gens, g)
	}
	if g.conns[slot] != nil {
		nc.Close()
		return false
	}
	id := p.conns[slot]
	if p.local == "" { // an absent path's first connection
		p.local = nc.LocalAddr().String()
		if pr.rank < t.rank {
			p.remote = nc.RemoteAddr().String()
		}
	}
	c := newConn(nc, id.idx, t.crc, t.deadAfter)
	c.setPoll(t.pollFor, t.yield, &t.sending)
	pr.setKbase(c) // (lead.go)
	c.path, c.pos = p, id.pos
	g.conns[slot] = c
	g.have++
	if t.state.Load() == stateAborted {
		t.abortConn(c)
	}
	if g.complete() {
		pr.rejoinable.Or(1 << p.idx)
		close(pr.newGen)
		pr.newGen = make(chan struct{})
		pr.pruneLocked(p.idx)
	}
	return true
}

// pruneLocked closes the connections of path k that no direction uses any
// more: those of generations older than both in use, and incomplete
// generations older than the newest complete one. The caller holds mu.
func (pr *peer) pruneLocked(k int) {
	low := min(pr.sgen[k], pr.rgen[k])
	if low > 0 {
		for _, c := range pr.pathOf(k).conns {
			if c != pr.sl && c != pr.slOld && c != pr.rl && c != pr.rlOld {
				// (A lead stream stays where it is: lead.go.)
				c.nc.Close()
			}
		}
	}
	_, done := pr.lastGen(k)
	keep := pr.gens[:0]
	for _, g := range pr.gens {
		if g.path.idx == k && (g.gen < low || !g.complete() && done != nil && g.gen < done.gen) {
			for _, c := range g.conns {
				if c != nil {
					c.nc.Close()
				}
			}
			continue
		}
		keep = append(keep, g)
	}
	clear(pr.gens[len(keep):])
	pr.gens = keep
}

// genConns appends the connections of every generation. The caller holds
// mu.
func (pr *peer) genConns(out []*conn) []*conn {
	for _, g := range pr.gens {
		for _, c := range g.conns {
			if c != nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// rejoinSend moves this rank's sends on the paths with a newer complete
// generation than they use to that generation, telling the peer first
// with a rejoin frame on connection 0. The caller holds the send gate, at
// the start of a striped send.
func (pr *peer) rejoinSend(ctx context.Context) error {
	for m := pr.rejoinable.Swap(0); m != 0; m &= m - 1 {
		k := bits.TrailingZeros32(m)
		p := pr.pathOf(k)
		pr.mu.Lock()
		_, g := pr.lastGen(k)
		if g == nil || g.gen <= pr.sgen[k] {
			pr.mu.Unlock()
			continue
		}
		for _, c := range g.conns {
			pr.sview[c.pos] = c
			pr.send.replace(c.pos, c)
		}
		pr.sgen[k] = g.gen
		pr.pruneLocked(k)
		pr.mu.Unlock()
		h := wire.FrameHeader{Type: wire.FrameRejoin, Paths: 1 << k, Total: uint64(g.gen)}
		if _, err := pr.leadWrite(ctx, &h, nil); err != nil {
			return err
		}
		if pr.leadOK {
			p.toldAt = pr.leadAt(pr.sl.wroteAt())
		}
		// Back in the plan with a small share, which grows with the
		// throughput measured on it.
		if r := pr.rejoinRate(p); r > 0 {
			p.setRate(r)
		}
		p.counters = false
		p.lastUsed = time.Time{}
		p.retired.Store(false)
		msg := "tcp: retired path back in use"
		if p.absent.Swap(false) {
			msg = "tcp: dropped path reached and in use"
		}
		pr.t.log.Info(msg, "peer", pr.rank, "path", k, "generation", g.gen, "local", p.local, "remote", p.remote)
	}
	return nil
}

// rejoinShare is the share of a striped message a path that rejoins
// starts with: above minShare, so that it carries a stripe of every
// message (a path below minShare is tried only every reprobeEvery) and is
// measured at each sample, its estimate growing as fast as its
// throughput shows (at most rateGrowth per sample).
const rejoinShare = 2 * minShare

// rejoinRate returns the estimate that gives path p rejoinShare of the
// paths in use, or 0 if no other path is in use.
func (pr *peer) rejoinRate(p *path) float64 {
	var others float64
	for _, o := range pr.paths {
		if o != p && !o.retired.Load() {
			others += o.getRate()
		}
	}
	return others * rejoinShare / (1 - rejoinShare)
}

// rejoinRecv moves this rank's receives on the paths a rejoin frame h names
// to the generation it announces, waiting for that generation's
// connections to be up at this end too. The caller holds the receive gate,
// between messages.
func (pr *peer) rejoinRecv(ctx context.Context, h *wire.FrameHeader) error {
	t := pr.t
	gen := uint8(h.Total)
	for m := uint32(h.Paths); m != 0; m &= m - 1 {
		k := bits.TrailingZeros32(m)
		if pr.mask&(1<<k) == 0 || !pr.leadOK && k == pr.conns[0].path.idx {
			return fmt.Errorf("rank %d moved path %d to generation %d; the pair uses paths %#x and never retires path %d: %w",
				pr.rank, k, gen, pr.mask, pr.conns[0].path.idx, errProtocol)
		}
		for {
			pr.mu.Lock()
			if gen <= pr.rgen[k] {
				at := pr.rgen[k]
				pr.mu.Unlock()
				return fmt.Errorf("rank %d moved path %d to generation %d, it was at %d: %w", pr.rank, k, gen, at, errProtocol)
			}
			if g := pr.findGen(k, gen); g != nil && g.complete() {
				for _, c := range g.conns {
					pr.rview[c.pos] = c
					pr.recv.replace(c.pos, c)
				}
				pr.rgen[k] = gen
				pr.rgone &^= 1 << k
				g.path.absent.Store(false)
				pr.pruneLocked(k)
				pr.mu.Unlock()
				break
			}
			if p := pr.pathOf(k); gen <= p.lost {
				// The peer took a generation this end gave up
				// dialing: its stripes on the path cannot come
				// here. Read the path from placeholders that fail
				// at once, so that each stripe on it waits for its
				// repair on the lead stream, which the peer sends
				// once it finds the connection closed (failover.go).
				for _, id := range p.conns {
					c := &conn{nc: absentConn{}, idx: id.idx, crc: t.crc, path: p, pos: id.pos}
					pr.rview[c.pos] = c
					pr.recv.replace(c.pos, c)
				}
				pr.rgen[k] = gen
				pr.rgone &^= 1 << k
				pr.pruneLocked(k)
				pr.mu.Unlock()
				t.log.Warn("tcp: peer moved a path to a generation that did not connect here; its stripes on it are repaired on the lead stream",
					"peer", pr.rank, "path", k, "generation", gen)
				break
			}
			ch := pr.newGen
			pr.mu.Unlock()
			select {
			case <-ch:
			case <-pr.failed:
				return pr.err()
			case <-t.ctx.Done():
				return t.stateErr()
			case <-ctx.Done():
				return fmt.Errorf("tcp: waiting for generation %d of path %d to rank %d: %w", gen, k, pr.rank, ctx.Err())
			}
		}
	}
	return nil
}
