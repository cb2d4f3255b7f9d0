package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// Backoff between dial attempts.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = 500 * time.Millisecond
)

// startDial starts dialing pr, once.
func (t *Transport) startDial(pr *peer) error {
	started := true
	pr.dialOnce.Do(func() {
		started = t.spawn(func() { t.dial(pr) })
	})
	if !started {
		return t.stateErr()
	}
	return nil
}

// dial opens all connections to pr, each within what is left of
// ConnectTimeout.
func (t *Transport) dial(pr *peer) {
	ctx, cancel := context.WithTimeout(t.ctx, t.connectTimeout)
	defer cancel()
	addr := t.addrs[pr.rank]
	for i := 0; i < t.nsocks; i++ {
		nc, err := t.dialOne(ctx, pr.rank, addr, i)
		if err != nil {
			if t.ctx.Err() == nil {
				t.log.Warn("tcp: could not connect", "peer", pr.rank, "addr", addr, "err", err)
				pr.fail(err)
			}
			return
		}
		if !pr.addConn(i, nc) {
			return
		}
	}
}

// dialOne opens connection i to rank r at addr, retrying until ctx ends or
// the peer answers the handshake.
func (t *Transport) dialOne(ctx context.Context, r int, addr string, i int) (net.Conn, error) {
	var d net.Dialer
	backoff := minBackoff
	var last error
	for {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			err = t.clientHandshake(ctx, nc, r, addr, i)
			if err == nil {
				return nc, nil
			}
			nc.Close()
			var refused *RefusedError
			var perr *errs.PeerError
			switch {
			case errors.As(err, &perr):
				return nil, perr
			case errors.As(err, &refused):
				return nil, &errs.PeerError{Peer: r, Kind: errs.ErrPeerLost, Cause: err}
			}
		}
		last = err
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, &errs.PeerError{Peer: r, Kind: errs.ErrPeerLost, Cause: fmt.Errorf(
				"tcp: could not connect to rank %d at %s within %v (last error: %v): %w", r, addr, t.connectTimeout, last, errs.ErrTimeout)}
		case <-timer.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// clientHandshake introduces this rank on nc as connection i to rank r and
// reads the answer.
func (t *Transport) clientHandshake(ctx context.Context, nc net.Conn, r int, addr string, i int) error {
	d, _ := ctx.Deadline()
	nc.SetDeadline(d)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(aLongTimeAgo) })
	unhooked := false
	defer func() {
		if !unhooked {
			stop()
		}
	}()
	h := wire.Handshake{
		Version: wire.HandshakeVersion,
		Token:   t.token,
		CommID:  t.commID,
		Rank:    uint32(t.rank),
		Target:  uint32(r),
		Size:    uint32(t.size),
		Socket:  uint16(i),
		Sockets: uint16(t.nsocks),
	}
	var b [wire.HandshakeSize]byte
	h.MarshalTo(b[:])
	if _, err := nc.Write(b[:]); err != nil {
		return err
	}
	rep, err := wire.ReadHandshakeReply(nc)
	if err != nil {
		return err
	}
	switch rep.Status {
	case wire.ReplyRefuse:
		return &RefusedError{Peer: r, Addr: addr, Reason: rep.Reason}
	case wire.ReplyAborted:
		return &errs.PeerError{Peer: r, Kind: errs.ErrAborted, Cause: errors.New(rep.Reason)}
	}
	if rep.Rank != uint32(r) || rep.CommID != t.commID {
		return &RefusedError{Peer: r, Addr: addr, Reason: fmt.Sprintf(
			"the listener there is rank %d of communicator %#x, not rank %d of %#x", rep.Rank, rep.CommID, r, t.commID)}
	}
	// Unhook ctx before clearing the deadline, so it cannot set one
	// again on a connection now in use.
	unhooked = true
	if !stop() {
		return fmt.Errorf("tcp: connecting to rank %d: %w", r, context.Cause(ctx))
	}
	return nc.SetDeadline(time.Time{})
}

// acceptLoop accepts connections until the listener closes.
func (t *Transport) acceptLoop() {
	for {
		nc, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			t.log.Warn("tcp: accept failed", "err", err)
			select {
			case <-t.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		t.mu.Lock()
		full := len(t.pending) >= maxPendingHandshakes
		if !full {
			t.pending[nc] = struct{}{}
		}
		t.mu.Unlock()
		if full {
			t.log.Warn("tcp: refused connection: too many handshakes in progress", "remote", nc.RemoteAddr().String())
			nc.Close()
			continue
		}
		if !t.spawn(func() { t.serveHandshake(nc) }) {
			nc.Close()
			return
		}
	}
}

// serveHandshake checks the handshake of an accepted connection and answers
// it; an accepted connection joins its peer.
func (t *Transport) serveHandshake(nc net.Conn) {
	joined := false
	defer func() {
		t.mu.Lock()
		delete(t.pending, nc)
		t.mu.Unlock()
		if !joined {
			nc.Close()
		}
	}()
	remote := nc.RemoteAddr().String()
	nc.SetDeadline(time.Now().Add(min(handshakeTimeout, t.connectTimeout)))
	var b [wire.HandshakeSize]byte
	// Check the magic first, so that a stranger speaking another protocol
	// is turned away without waiting for a full handshake.
	m := len(wire.HandshakeMagic)
	n, err := io.ReadFull(nc, b[:m])
	if err == nil && string(b[:m]) != wire.HandshakeMagic {
		t.refuse(nc, remote, -1, fmt.Sprintf("malformed handshake: starts with %q, not %q", b[:m], wire.HandshakeMagic))
		return
	}
	if err == nil {
		n, err = io.ReadFull(nc, b[m:])
		n += m
	}
	if err != nil {
		if t.ctx.Err() == nil {
			t.log.Warn("tcp: refused connection: no complete handshake", "remote", remote, "bytes", n, "err", err)
		}
		return
	}
	var h wire.Handshake
	if err := h.Unmarshal(b[:]); err != nil {
		t.refuse(nc, remote, -1, "malformed handshake: "+err.Error())
		return
	}
	rank := int(h.Rank)
	if reason := t.check(&h); reason != "" {
		t.refuse(nc, remote, rank, reason)
		return
	}
	if t.state.Load() != stateOpen {
		t.mu.Lock()
		reason := t.abortText
		t.mu.Unlock()
		if reason == "" {
			reason = "closed"
		}
		t.reply(nc, wire.ReplyAborted, reason)
		return
	}
	pr := t.peers[rank]
	if reason := pr.reserve(int(h.Socket)); reason != "" {
		t.refuse(nc, remote, rank, reason)
		return
	}
	if err := t.reply(nc, wire.ReplyAccept, ""); err != nil {
		pr.unreserve(int(h.Socket))
		t.log.Warn("tcp: lost connection during handshake", "remote", remote, "peer", rank, "err", err)
		return
	}
	nc.SetDeadline(time.Time{})
	joined = pr.addConn(int(h.Socket), nc)
}

// check returns why h is not welcome here, or "" if it is. A handshake with
// the wrong token learns nothing else about this rank.
func (t *Transport) check(h *wire.Handshake) string {
	switch {
	case !h.TokenMatches(&t.token):
		return "job token mismatch"
	case h.CommID != t.commID:
		return fmt.Sprintf("communicator %#x, this is %#x", h.CommID, t.commID)
	case int(h.Size) != t.size:
		return fmt.Sprintf("world of %d ranks, this is of %d", h.Size, t.size)
	case int(h.Target) != t.rank:
		return fmt.Sprintf("meant for rank %d, this is rank %d", h.Target, t.rank)
	case int(h.Rank) > t.rank:
		return fmt.Sprintf("rank %d dialed lower rank %d; higher ranks wait to be dialed", h.Rank, t.rank)
	case int(h.Sockets) != t.nsocks:
		return fmt.Sprintf("%d sockets per peer, this rank uses %d", h.Sockets, t.nsocks)
	}
	return ""
}

func (t *Transport) refuse(nc net.Conn, remote string, rank int, reason string) {
	t.log.Warn("tcp: refused connection", "remote", remote, "claimed_rank", rank, "reason", reason)
	t.reply(nc, wire.ReplyRefuse, reason)
}

func (t *Transport) reply(nc net.Conn, status wire.ReplyStatus, reason string) error {
	rep := wire.HandshakeReply{Version: wire.HandshakeVersion, Status: status, Rank: uint32(t.rank), CommID: t.commID, Reason: reason}
	if status != wire.ReplyAccept {
		rep.CommID = 0
	}
	_, err := nc.Write(rep.AppendTo(nil))
	return err
}

// reserve claims socket index i for a handshake in progress, or says why
// it cannot.
func (pr *peer) reserve(i int) string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	switch {
	case pr.closed || pr.err() != nil:
		return fmt.Sprintf("rank %d is no longer connectable", pr.rank)
	case pr.conns[i] != nil || pr.reserved[i]:
		return fmt.Sprintf("rank %d is already connected on socket %d", pr.rank, i)
	}
	pr.reserved[i] = true
	return ""
}

func (pr *peer) unreserve(i int) {
	pr.mu.Lock()
	pr.reserved[i] = false
	pr.mu.Unlock()
}

// addConn installs nc as connection i of the pair. Once all are in, the
// pair is ready. It reports false, closing nc, if the pair was closed.
func (pr *peer) addConn(i int, nc net.Conn) bool {
	t := pr.t
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.reserved[i] = false
	if pr.closed {
		nc.Close()
		return false
	}
	c := newConn(nc, i, t.crc)
	c.setPoll(t.pollFor, t.yield, &t.sending)
	pr.conns[i] = c
	pr.have++
	if t.state.Load() == stateAborted {
		t.abortConn(c)
	}
	if pr.have < len(pr.conns) {
		return true
	}
	pr.send.setConns(pr.conns)
	pr.recv.setConns(pr.conns)
	for _, c := range pr.conns[1:] {
		sw, rw := newWorker(c), newWorker(c)
		pr.sendW = append(pr.sendW, sw)
		pr.recvW = append(pr.recvW, rw)
		t.spawn(func() { sw.run(pr.rank, t.ctx.Done()) })
		t.spawn(func() { rw.run(pr.rank, t.ctx.Done()) })
	}
	close(pr.ready)
	return true
}
