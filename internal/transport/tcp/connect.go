package tcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"slices"
	"strings"
	"syscall"
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
// ConnectTimeout: with several listener addresses, it first finds which
// paths connect, then opens NSocks connections on each.
func (t *Transport) dial(pr *peer) {
	ctx, cancel := context.WithTimeout(t.ctx, t.connectTimeout)
	defer cancel()
	addrs := t.paths[pr.rank]
	mask := uint16(1)
	if len(addrs) > 1 {
		var err error
		if mask, err = t.findPaths(ctx, pr, addrs); err != nil {
			if t.ctx.Err() == nil {
				t.log.Warn("tcp: could not connect", "peer", pr.rank, "addrs", t.addrs[pr.rank], "err", err)
				pr.fail(err)
			}
			return
		}
	}
	if reason := pr.layout(len(addrs), mask); reason != "" {
		return // failed meanwhile
	}
	// The paths other than the first are dialed first, each checked by
	// its first connection: one that reaches another listener than the
	// peer's (the same private address on two hosts) is dropped. The
	// first path's connections, dialed last, then tell the listener the
	// paths in use (see peer.layout).
	first := bits.TrailingZeros16(mask)
	for _, pi := range pathOrder(mask, first) {
		for s := 0; s < t.nsocks; s++ {
			i := pi*t.nsocks + s
			nc, err := t.dialOne(ctx, pr.rank, addrs[pi], i, len(addrs), mask)
			if err != nil && s == 0 && pi != first && elsewhere(err) {
				pr.dropPath(pi, addrs[pi], "path reaches another listener than the peer's; dropped", err)
				mask &^= 1 << pi
				break
			}
			if err != nil {
				if t.ctx.Err() == nil {
					t.log.Warn("tcp: could not connect", "peer", pr.rank, "addr", addrs[pi], "err", err)
					pr.fail(err)
				}
				return
			}
			if !pr.addConn(i, nc) {
				return
			}
		}
	}
}

// pathOrder lists the paths in mask, first last.
func pathOrder(mask uint16, first int) []int {
	var order []int
	for pi := range MaxPaths {
		if mask&(1<<pi) != 0 && pi != first {
			order = append(order, pi)
		}
	}
	return append(order, first)
}

// elsewhere reports whether err, met dialing a path's first connection,
// shows that the address reaches a listener other than the peer's: one
// that answered in another protocol, could not prove it holds the job
// token, or is another rank or communicator of the job.
func elsewhere(err error) bool {
	var re *RefusedError
	return errors.As(err, &re) && re.elsewhere
}

// dropPath takes path pi (at remote) out of the pair before it connected,
// logging why: the dialer found it does not reach the peer.
func (pr *peer) dropPath(pi int, remote, msg string, err error) {
	pr.t.log.Warn("tcp: "+msg, "peer", pr.rank, "path", pi, "addr", remote, "err", err)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.mask &^= 1 << pi
}

// dialOne opens connection i to rank r at addr, retrying until ctx ends or
// the peer answers the handshake.
func (t *Transport) dialOne(ctx context.Context, r int, addr string, i, npaths int, mask uint16) (net.Conn, error) {
	var d net.Dialer
	backoff := minBackoff
	var last error
	refusals := 0
	for {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if errors.Is(err, syscall.ECONNREFUSED) {
			// The peer listened before its address was published, so
			// nothing listening there means it is gone.
			if refusals++; refusals >= goneAfterRefusals {
				return nil, &errs.PeerError{Peer: r, Kind: errs.ErrPeerLost, Cause: fmt.Errorf(
					"tcp: rank %d's listener at %s refuses connections: the process is gone", r, addr)}
			}
		} else {
			refusals = 0
		}
		if err == nil {
			err = t.clientHandshake(ctx, nc, r, addr, i, npaths, mask, 0)
			if err == nil {
				return nc, nil
			}
			nc.Close()
			var refused *RefusedError
			var perr *errs.PeerError
			switch {
			case errors.As(err, &perr):
				return nil, perr
			case errors.Is(err, wire.ErrMalformed):
				// Not an hcomm listener of this version.
				err = &RefusedError{Peer: r, Addr: addr, Reason: "answered in another protocol: " + err.Error(), elsewhere: true}
				fallthrough
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

// clientHandshake introduces this rank on nc as connection i to rank r,
// proves it holds the job key, and checks the listener's proof (see
// wire.Handshake for the exchange).
func (t *Transport) clientHandshake(ctx context.Context, nc net.Conn, r int, addr string, i, npaths int, mask uint16, gen uint8) error {
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
		CommID:  t.commID,
		Rank:    uint32(t.rank),
		Target:  uint32(r),
		Size:    uint32(t.size),
		Socket:  uint16(i),
		Sockets: uint16(npaths * t.nsocks),
		Gen:     gen,
	}
	if npaths > 1 {
		h.Paths = mask
	}
	rand.Read(h.Nonce[:])
	var b [wire.HandshakeSize]byte
	h.MarshalTo(b[:])
	if _, err := nc.Write(b[:]); err != nil {
		return err
	}
	// A listener of another protocol may say less than a reply before it
	// closes: look at the magic first.
	var magic [len(wire.HandshakeMagic)]byte
	if _, err := io.ReadFull(nc, magic[:]); err != nil {
		return err
	}
	if string(magic[:]) != wire.HandshakeMagic {
		return fmt.Errorf("tcp: the reply starts with %q, not %q: %w", magic[:], wire.HandshakeMagic, wire.ErrMalformed)
	}
	ch, err := wire.ReadHandshakeReply(io.MultiReader(bytes.NewReader(magic[:]), nc))
	var otherVersion *wire.VersionError
	if errors.As(err, &otherVersion) {
		// A listener of another build (before version 6 it refuses a
		// handshake of another version at once, unproven). On the
		// first path this is the peer (see elsewhere).
		return &RefusedError{Peer: r, Addr: addr, Reason: fmt.Sprintf("%s (it answered %s: %s)",
			otherVersion, ch.Status, ch.PrintableReason()), elsewhere: true, cause: otherVersion}
	}
	if err != nil {
		return err
	}
	if ch.Status != wire.ReplyChallenge {
		// Nothing before the challenge is proven: whatever it says, the
		// listener has not shown it belongs to the job.
		return &RefusedError{Peer: r, Addr: addr, Reason: fmt.Sprintf("%s before any proof: %s", ch.Status, ch.PrintableReason()), elsewhere: true}
	}
	nonce := ch.Data
	proof := wire.DialerProof(&t.key, &h, &nonce)
	if _, err := nc.Write(proof[:]); err != nil {
		return err
	}
	rep, err := wire.ReadHandshakeReply(nc)
	if errors.As(err, &otherVersion) {
		return &RefusedError{Peer: r, Addr: addr, Reason: fmt.Sprintf("%s (it answered %s: %s)",
			otherVersion, rep.Status, rep.PrintableReason()), cause: otherVersion}
	}
	if err != nil {
		return err
	}
	if rep.Status == wire.ReplyChallenge {
		return &RefusedError{Peer: r, Addr: addr, Reason: "a second challenge (protocol violation)"}
	}
	want := wire.ListenerProof(&t.key, &h, &nonce, rep.Status, rep.Reason)
	switch {
	case !wire.ProofEqual(&want, &rep.Data) && rep.Status == wire.ReplyRefuse:
		return &RefusedError{Peer: r, Addr: addr, Reason: rep.PrintableReason(), elsewhere: true}
	case !wire.ProofEqual(&want, &rep.Data):
		return &RefusedError{Peer: r, Addr: addr, Reason: fmt.Sprintf(
			"the listener there answered %s without proving it holds the job token (another job, or an impostor)", rep.Status), elsewhere: true}
	case rep.Status == wire.ReplyRefuse:
		return &RefusedError{Peer: r, Addr: addr, Reason: rep.PrintableReason(), elsewhere: notThisRank(rep.Reason), cause: versionRefusal(rep.Reason)}
	case rep.Status == wire.ReplyAborted:
		return &errs.PeerError{Peer: r, Kind: errs.ErrAborted, Cause: errors.New(rep.PrintableReason())}
	}
	// Unhook ctx before clearing the deadline, so it cannot set one
	// again on a connection now in use.
	unhooked = true
	if !stop() {
		return fmt.Errorf("tcp: connecting to rank %d: %w", r, context.Cause(ctx))
	}
	return nc.SetDeadline(time.Time{})
}

// goneAfterRefusals is how many refused connection attempts in a row
// make a peer lost.
const goneAfterRefusals = 3

// probeEvery is how often a rank waiting to be dialed by a lower rank
// checks that the lower rank still listens.
const probeEvery = 200 * time.Millisecond

// startProbe starts, once, checking that lower rank pr, which this rank
// waits to be dialed by, is still there: a rank that died before it dialed
// would otherwise be waited for until the caller's deadline. A probe is a
// connection to its listener, closed at once; refused ones make the peer
// lost.
func (t *Transport) startProbe(pr *peer) {
	addrs := t.paths[pr.rank]
	if len(addrs) == 0 {
		return
	}
	pr.probeOnce.Do(func() {
		t.spawn(func() {
			refusals := 0
			d := net.Dialer{Timeout: probeEvery}
			timer := time.NewTimer(probeEvery)
			defer timer.Stop()
			for {
				select {
				case <-pr.ready:
					return
				case <-pr.failed:
					return
				case <-t.ctx.Done():
					return
				case <-timer.C:
				}
				// Lost only if every path refuses.
				refused := 0
				for _, addr := range addrs {
					ctx, cancel := context.WithTimeout(t.ctx, probeEvery)
					nc, err := d.DialContext(ctx, "tcp", addr)
					cancel()
					if err == nil {
						nc.Close()
						break
					}
					if !errors.Is(err, syscall.ECONNREFUSED) {
						break
					}
					refused++
				}
				if refused < len(addrs) {
					refusals = 0
				} else if refusals++; refusals >= goneAfterRefusals {
					pr.fail(&errs.PeerError{Peer: pr.rank, Kind: errs.ErrPeerLost, Cause: fmt.Errorf(
						"tcp: rank %d never connected and its listener at %s refuses connections: the process is gone", pr.rank, t.addrs[pr.rank])})
					return
				}
				timer.Reset(probeEvery / time.Duration(1+refusals))
			}
		})
	})
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
		pc, evicted := t.admit(nc)
		if evicted != nil {
			evicted.nc.Close()
			t.refusals.note(evicted.remote, -1, "too many handshakes in progress from its address or in all; closed the oldest")
		}
		if !t.spawn(func() { t.serveHandshake(pc) }) {
			nc.Close()
			return
		}
	}
}

// errUnauthenticated is the reason given to a dialer whose proof did not
// verify. It says nothing about this rank.
const errUnauthenticated = "authentication failed: the dialer does not hold this job's token"

// serveHandshake runs the listener's side of the exchange on an accepted
// connection (see wire.Handshake); an accepted connection joins its peer.
func (t *Transport) serveHandshake(pc *pendingConn) {
	nc := pc.nc
	joined := false
	defer func() {
		t.release(pc)
		if !joined {
			nc.Close()
		}
	}()
	remote := pc.remote
	nc.SetDeadline(time.Now().Add(min(handshakeTimeout, t.connectTimeout)))
	var b [wire.HandshakeSize]byte
	// Check the magic first, so that a stranger speaking another protocol
	// is turned away without waiting for a full handshake.
	m := len(wire.HandshakeMagic)
	n, err := io.ReadFull(nc, b[:m])
	if err == nil && string(b[:m]) != wire.HandshakeMagic {
		t.refuse(nc, remote, -1, wire.HandshakeVersion, fmt.Sprintf("malformed handshake: starts with %q, not %q", b[:m], wire.HandshakeMagic))
		return
	}
	if err == nil {
		n, err = io.ReadFull(nc, b[m:])
		n += m
	}
	if err != nil {
		if n == 0 && err == io.EOF {
			// Closed without a word: a peer checking this rank is
			// alive, or a port scan.
			return
		}
		t.incomplete(remote, -1, n, err)
		return
	}
	var h wire.Handshake
	var otherVersion *wire.VersionError
	if err := h.Unmarshal(b[:]); err != nil {
		// A dialer of another version is answered in its own, so that it
		// reads why; one whose handshake this rank cannot decode is told
		// so at once, one whose it can proves itself first (below).
		ver := uint16(wire.HandshakeVersion)
		if errors.As(err, &otherVersion) {
			ver = otherVersion.Remote
		}
		// (h is left as it was, all zero, for a version of another
		// layout: its Version may equal the dialer's, 0.)
		if otherVersion == nil || otherVersion.Remote < wire.FirstVersion {
			t.refuse(nc, remote, -1, ver, "malformed handshake: "+err.Error())
			return
		}
	}
	rank := int(h.Rank)
	ch := wire.HandshakeReply{Version: h.Version, Status: wire.ReplyChallenge}
	rand.Read(ch.Data[:])
	nonce := ch.Data
	if _, err := nc.Write(ch.AppendTo(b[:0])); err != nil {
		t.incomplete(remote, rank, wire.HandshakeSize, err)
		return
	}
	var proof [wire.ProofSize]byte
	if n, err := io.ReadFull(nc, proof[:]); err != nil {
		t.incomplete(remote, rank, wire.HandshakeSize+n, err)
		return
	}
	if want := wire.DialerProof(&t.key, &h, &nonce); !wire.ProofEqual(&want, &proof) {
		t.refuse(nc, remote, rank, h.Version, errUnauthenticated)
		return
	}
	// From here on the dialer is a rank of this job: it no longer counts
	// against the limits on strangers, and may be told why it is refused.
	if !t.authenticated(pc) {
		return // closed to make room before its proof came in
	}
	if reason := t.check(&h); reason != "" {
		t.refusals.note(remote, rank, reason)
		t.answer(nc, &h, &nonce, wire.ReplyRefuse, reason)
		return
	}
	if otherVersion != nil {
		// A rank of this job, proven, running a build of another
		// protocol version: the pair cannot work. Both ends learn why
		// now rather than at the first frame the other misreads.
		reason := fmt.Sprintf(reasonVersion+"%d; rank %d speaks version %d (every rank of a job must run a build of the same protocol version)",
			h.Version, t.rank, wire.HandshakeVersion)
		t.refusals.note(remote, rank, reason)
		t.answer(nc, &h, &nonce, wire.ReplyRefuse, reason)
		t.peers[rank].fail(&errs.PeerError{Peer: rank, Kind: errs.ErrPeerLost, Cause: fmt.Errorf(
			"tcp: rank %d dialed from %s: %w", rank, remote, otherVersion)})
		return
	}
	if t.state.Load() != stateOpen {
		t.mu.Lock()
		reason := t.abortText
		t.mu.Unlock()
		if reason == "" {
			reason = "closed"
		}
		t.answer(nc, &h, &nonce, wire.ReplyAborted, reason)
		return
	}
	pr := t.peers[rank]
	mask := h.Paths
	if mask == 0 {
		mask = 1
	}
	if reason := pr.layout(int(h.Sockets)/t.nsocks, mask); reason != "" {
		t.refusals.note(remote, rank, reason)
		t.answer(nc, &h, &nonce, wire.ReplyRefuse, reason)
		return
	}
	if h.Gen > 0 {
		// A retired path dialed again (redial.go).
		joined = t.acceptGen(nc, pr, &h, &nonce, remote)
		return
	}
	if reason := pr.reserve(int(h.Socket)); reason != "" {
		t.refusals.note(remote, rank, reason)
		t.answer(nc, &h, &nonce, wire.ReplyRefuse, reason)
		return
	}
	if err := t.answer(nc, &h, &nonce, wire.ReplyAccept, ""); err != nil {
		pr.unreserve(int(h.Socket))
		t.log.Warn("tcp: lost connection during handshake", "remote", remote, "peer", rank, "err", err)
		return
	}
	nc.SetDeadline(time.Time{})
	joined = pr.addConn(int(h.Socket), nc)
}

// check returns why the handshake of an authenticated dialer is not welcome
// here, or "" if it is.
func (t *Transport) check(h *wire.Handshake) string {
	switch {
	case h.CommID != t.commID:
		return fmt.Sprintf(reasonComm+"%#x, this is %#x", h.CommID, t.commID)
	case int(h.Size) != t.size:
		return fmt.Sprintf(reasonSize+"%d ranks, this is of %d", h.Size, t.size)
	case int(h.Target) != t.rank:
		return fmt.Sprintf(reasonRank+"%d, this is rank %d", h.Target, t.rank)
	case int(h.Rank) > t.rank:
		return fmt.Sprintf("rank %d dialed lower rank %d; higher ranks wait to be dialed", h.Rank, t.rank)
	case int(h.Sockets)%t.nsocks != 0 || int(h.Sockets)/t.nsocks > MaxPaths:
		return fmt.Sprintf("%d sockets per peer, this rank uses %d per path", h.Sockets, t.nsocks)
	case t.ownPaths > 0 && int(h.Sockets)/t.nsocks != t.ownPaths:
		return fmt.Sprintf("%d paths, this rank listens on %d addresses", int(h.Sockets)/t.nsocks, t.ownPaths)
	}
	return ""
}

// The reasons check gives a dialer that reached another rank or
// communicator of the job than it meant to: the address it dialed is not
// its peer's (see notThisRank).
const (
	reasonComm = "communicator "
	reasonSize = "world of "
	reasonRank = "meant for rank "
)

// reasonVersion opens the reason a listener gives a proven dialer of
// another protocol version.
const reasonVersion = "protocol version "

// versionRefusal returns the *wire.VersionError a proven listener's
// refusal reports (its reason opens with reasonVersion: a listener of a
// later build answering in this one's version), or nil.
func versionRefusal(reason string) error {
	var mine, rank int
	var theirs uint16
	if !strings.HasPrefix(reason, reasonVersion) {
		return nil
	}
	if _, err := fmt.Sscanf(reason, reasonVersion+"%d; rank %d speaks version %d", &mine, &rank, &theirs); err != nil || mine != wire.HandshakeVersion {
		return nil
	}
	return &wire.VersionError{Local: wire.HandshakeVersion, Remote: theirs}
}

// notThisRank reports whether a proven listener's refusal says it is not
// the rank the dialer meant to reach.
func notThisRank(reason string) bool {
	return strings.HasPrefix(reason, reasonComm) || strings.HasPrefix(reason, reasonSize) || strings.HasPrefix(reason, reasonRank)
}

// refuse turns away a dialer that has not proven itself, with a reason that
// says nothing about this rank, in protocol version ver (the dialer's, so
// that it reads the reason).
func (t *Transport) refuse(nc net.Conn, remote string, claimed int, ver uint16, reason string) {
	t.refusals.note(remote, claimed, reason)
	rep := wire.HandshakeReply{Version: ver, Status: wire.ReplyRefuse, Reason: wire.CutReason(reason)}
	nc.Write(rep.AppendTo(nil))
}

// incomplete records a connection that ended or timed out part way through
// its handshake.
func (t *Transport) incomplete(remote string, claimed, n int, err error) {
	if t.ctx.Err() == nil {
		t.refusals.note(remote, claimed, fmt.Sprintf("no complete handshake (%d bytes): %v", n, err))
	}
}

// answer sends the final reply to an authenticated dialer, with this rank's
// proof, in the dialer's protocol version.
func (t *Transport) answer(nc net.Conn, h *wire.Handshake, nonce *[wire.NonceSize]byte, status wire.ReplyStatus, reason string) error {
	reason = wire.CutReason(reason)
	rep := wire.HandshakeReply{Version: h.Version, Status: status, Reason: reason,
		Data: wire.ListenerProof(&t.key, h, nonce, status, reason)}
	_, err := nc.Write(rep.AppendTo(nil))
	return err
}

// layout sets, or checks against what was set, the pair's paths: npaths
// listener addresses of which mask are in use. It says why it cannot.
func (pr *peer) layout(npaths int, mask uint16) string {
	nsocks := pr.t.nsocks
	pr.mu.Lock()
	defer pr.mu.Unlock()
	switch {
	case npaths < 1 || npaths > MaxPaths || mask == 0 || mask>>npaths != 0:
		return fmt.Sprintf("paths %#x of %d", mask, npaths)
	case pr.slots == nil:
		pr.slots = make([]*conn, npaths*nsocks)
		pr.reserved = make([]bool, npaths*nsocks)
		pr.mask = mask
	case len(pr.slots) != npaths*nsocks || mask&^pr.mask != 0 || mask != pr.mask && pr.usedOutside(mask):
		return fmt.Sprintf("rank %d connects on paths %#x of %d, earlier on %#x of %d", pr.rank, mask, npaths, pr.mask, len(pr.slots)/nsocks)
	case mask != pr.mask:
		// The dialer dropped paths it found to reach another listener
		// before any of their connections came: the pair waits for
		// those of the paths left.
		pr.mask = mask
	}
	return ""
}

// usedOutside reports whether a connection of the pair is in, or in its
// handshake, on a path outside mask. The caller holds pr.mu.
func (pr *peer) usedOutside(mask uint16) bool {
	for i := range pr.slots {
		if mask&(1<<(i/pr.t.nsocks)) == 0 && (pr.slots[i] != nil || pr.reserved[i]) {
			return true
		}
	}
	return false
}

// reserve claims socket index i for a handshake in progress, or says why
// it cannot.
func (pr *peer) reserve(i int) string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	switch {
	case pr.closed || pr.err() != nil:
		return fmt.Sprintf("rank %d is no longer connectable", pr.rank)
	case pr.mask&(1<<(i/pr.t.nsocks)) == 0:
		return fmt.Sprintf("rank %d connects socket %d on a path outside %#x", pr.rank, i, pr.mask)
	case pr.conns != nil:
		return fmt.Sprintf("rank %d is already connected; socket %d comes after the pair was (a path dialed again has a generation)", pr.rank, i)
	case pr.slots[i] != nil || pr.reserved[i]:
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
	c := newConn(nc, i, t.crc, t.deadAfter)
	c.setPoll(t.pollFor, t.yield, &t.sending)
	pr.slots[i] = c
	pr.have++
	if t.state.Load() == stateAborted {
		t.abortConn(c)
	}
	if pr.have < maskPaths(pr.mask)*t.nsocks {
		return true
	}
	// All in: the connections in use, by path then slot.
	var addrs []string
	if pr.rank > t.rank {
		addrs = t.paths[pr.rank]
	}
	for j, c := range pr.slots {
		if c == nil {
			continue
		}
		if j%t.nsocks == 0 {
			p := &path{idx: j / t.nsocks, local: c.nc.LocalAddr().String(), remote: c.nc.RemoteAddr().String()}
			if p.idx < len(addrs) {
				p.remote = addrs[p.idx]
			}
			rate := defaultRate
			if t.linkRate != nil {
				if ta, ok := c.nc.LocalAddr().(*net.TCPAddr); ok {
					if r := t.linkRate(ta.IP); r > 0 {
						rate = r
					}
				}
			}
			p.setRate(rate)
			pr.paths = append(pr.paths, p)
		}
		p := pr.paths[len(pr.paths)-1]
		c.path, c.pos = p, len(pr.conns)
		p.conns = append(p.conns, c)
		pr.conns = append(pr.conns, c)
	}
	pr.addAbsent(addrs)
	pr.cut = make([]uint64, len(pr.conns))
	pr.rparts = make([]*conn, 0, len(pr.conns))
	pr.sview = slices.Clone(pr.conns)
	pr.rview = slices.Clone(pr.conns)
	pr.send.setConns(pr.conns)
	pr.recv.setConns(pr.conns)
	pr.sdone = make(chan result, len(pr.conns))
	pr.rdone = make(chan result, len(pr.conns))
	pr.setupFailover()
	pr.setupLead()
	for _, c := range pr.conns {
		sw, rw := newWorker(pr, c.pos, pr.sdone), newWorker(pr, c.pos, pr.rdone)
		pr.sendW = append(pr.sendW, sw)
		pr.recvW = append(pr.recvW, rw)
		t.spawn(func() { sw.run(pr.rank, t.ctx.Done()) })
		t.spawn(func() { rw.run(pr.rank, t.ctx.Done()) })
	}
	close(pr.ready)
	if pr.reprobe != 0 {
		t.spawn(pr.probeAbsent)
	}
	if pr.failover && t.pingEvery > 0 {
		t.spawn(pr.pingLoop)
	}
	return true
}
