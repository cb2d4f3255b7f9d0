package tcp

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// recorder is a TCP proxy that forwards one connection to target and keeps
// what the dialing side sent.
type recorder struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	sent   []byte
	done   chan struct{}
}

func newRecorder(t *testing.T, target string) *recorder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln, target: target, done: make(chan struct{})}
	t.Cleanup(func() { ln.Close(); <-r.done })
	go r.run()
	return r
}

func (r *recorder) run() {
	defer close(r.done)
	c, err := r.ln.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	s, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	defer s.Close()
	go io.Copy(c, s)
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			r.mu.Lock()
			r.sent = append(r.sent, buf[:n]...)
			r.mu.Unlock()
			s.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.sent...)
}

// TestHandshakeReplay records everything a real rank sends to open a
// connection and replays it to the same listener: the listener's fresh
// challenge makes the recorded proof worthless.
func TestHandshakeReplay(t *testing.T) {
	logEveryRefusal(t)
	w := newWorld(t, 2, 1)
	listener := w.transport(1)
	rec := newRecorder(t, w.addrs[1])
	addrs := append([]string(nil), w.addrs...)
	addrs[1] = rec.ln.Addr().String()
	dialer, err := New(Config{Rank: 0, Size: 2, Token: testToken, CommID: testCommID,
		Listener: w.lns[0], Addrs: addrs, ConnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w.lns[0] = nil
	defer dialer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	runAll(t, []*Transport{listener, dialer}, func(tr *Transport) error { return barrier2(ctx, tr, 1-tr.Rank()) })

	sent := rec.bytes()
	if len(sent) < wire.HandshakeSize+wire.ProofSize {
		t.Fatalf("recorded %d bytes, want at least a handshake and a proof", len(sent))
	}
	hs := sent[:wire.HandshakeSize+wire.ProofSize]
	if strings.Contains(string(hs), string(testToken[:10])) {
		t.Fatal("the handshake carries the token")
	}
	// Replay it as socket 0 of a fresh world's rank 0, whose slot is free.
	w2 := newWorld(t, 2, 1)
	w2.transport(1)
	for _, addr := range []string{w.addrs[1], w2.addrs[1]} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(hs[:wire.HandshakeSize])
		ch, err := wire.ReadHandshakeReply(c)
		if err != nil || ch.Status != wire.ReplyChallenge {
			t.Fatalf("replayed handshake: %+v, %v; want a challenge", ch, err)
		}
		c.Write(hs[wire.HandshakeSize:])
		rep, err := wire.ReadHandshakeReply(c)
		c.Close()
		if err != nil || rep.Status != wire.ReplyRefuse || rep.Reason != errUnauthenticated {
			t.Fatalf("replayed proof: %+v, %v; want a refusal for failed authentication", rep, err)
		}
	}
}

// TestImpostorRankZero has strangers without the token claim rank 0 at
// rank 1's listener, one refused at once and one stalling after its
// handshake, before the real rank 0 dials: the real one gets through.
func TestImpostorRankZero(t *testing.T) {
	logEveryRefusal(t)
	w := newWorld(t, 2, 2)
	listener := w.transport(1)
	wrongKey := wire.HandshakeKey(&[32]byte{'i', 'm', 'p'}, "")
	for s := 0; s < 2; s++ {
		c, err := net.Dial("tcp", w.addrs[1])
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		rep, err := rawHandshakeKey(c, &wrongKey, 0, 1, 2, 2, func(h *wire.Handshake) { h.Socket = uint16(s) })
		c.Close()
		if err != nil || rep.Status != wire.ReplyRefuse || rep.Reason != errUnauthenticated {
			t.Fatalf("impostor on socket %d: %+v, %v; want a refusal", s, rep, err)
		}
		if strings.Contains(rep.Reason, "rank") && strings.Contains(rep.Reason, "1") {
			t.Errorf("the refusal tells a stranger the listener's rank: %q", rep.Reason)
		}
	}
	// One that sends a handshake and never its proof holds nothing.
	stall, err := net.Dial("tcp", w.addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	stall.Write(rawHello(0, 1, 2, 2, nil))
	if ch, err := wire.ReadHandshakeReply(stall); err != nil || ch.Status != wire.ReplyChallenge {
		t.Fatalf("stalling impostor: %+v, %v; want a challenge", ch, err)
	}
	real := w.transport(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	runAll(t, []*Transport{listener, real}, func(tr *Transport) error { return barrier2(ctx, tr, 1-tr.Rank()) })
	if log := w.logs.String(); !strings.Contains(log, "claimed_rank=0") || !strings.Contains(log, "authentication failed") {
		t.Errorf("the listener did not log the impostors:\n%s", log)
	}
}

// TestImpostorListener has a rank dial a listener that does not hold the
// token and accepts anything: the dialer refuses it, at once.
func TestImpostorListener(t *testing.T) {
	w := newWorld(t, 2, 1)
	fake := w.lns[1]
	w.lns[1] = nil
	defer fake.Close()
	go func() {
		for {
			c, err := fake.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, wire.HandshakeSize+wire.ProofSize)
				if _, err := io.ReadFull(c, b[:wire.HandshakeSize]); err != nil {
					return
				}
				ch := wire.HandshakeReply{Version: wire.HandshakeVersion, Status: wire.ReplyChallenge}
				c.Write(ch.AppendTo(nil))
				if _, err := io.ReadFull(c, b[wire.HandshakeSize:]); err != nil {
					return
				}
				acc := wire.HandshakeReply{Version: wire.HandshakeVersion, Status: wire.ReplyAccept}
				c.Write(acc.AppendTo(nil))
				io.Copy(io.Discard, c)
			}()
		}
	}()
	dialer := w.transport(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := dialer.Connect(ctx, []int{1})
	var refused *RefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Reason, "without proving") || !errors.Is(err, errs.ErrPeerLost) {
		t.Fatalf("Connect to an impostor: %v, want a RefusedError saying it proved nothing", err)
	}
}

// TestAbortNamesLostRank has rank 1 abort because it lost rank 2 and close
// at once, as a process exiting right after its error does: rank 0,
// blocked receiving from rank 1, learns that rank 2 was lost, not that
// rank 1 vanished.
func TestAbortNamesLostRank(t *testing.T) {
	for trial := 0; trial < 20; trial++ {
		w := newWorld(t, 3, 2)
		tr0, tr1 := w.transport(0), w.transport(1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		runAll(t, []*Transport{tr0, tr1}, func(tr *Transport) error { return tr.Connect(ctx, []int{1 - tr.Rank()}) })
		got := make(chan error, 1)
		go func() {
			fp := fpFor(1, 10)
			got <- tr0.Recv(ctx, 1, &fp, make([]byte, 10))
		}()
		tr1.Abort(&errs.PeerError{Peer: 2, Kind: errs.ErrPeerLost, Cause: errors.New("connection reset by peer")})
		// The aborting rank's own calls keep the cause.
		fp := fpFor(2, 0)
		if err := tr1.Send(context.Background(), 0, &fp, nil); !errors.Is(err, errs.ErrAborted) || !errors.Is(err, errs.ErrPeerLost) {
			t.Fatalf("Send after an Abort for a lost rank: %v, want ErrAborted and ErrPeerLost", err)
		}
		tr1.Close()
		err := <-got
		cancel()
		var perr *errs.PeerError
		if !errors.As(err, &perr) || perr.Peer != 2 || !errors.Is(err, errs.ErrPeerLost) || !strings.Contains(err.Error(), "rank 1 reported") {
			t.Fatalf("trial %d: Recv from a rank that aborted after losing rank 2: %v, want ErrPeerLost naming rank 2", trial, err)
		}
		tr0.Close()
	}
}

// TestAbortNamesImpossibleRank has a peer's abort frame name a lost rank
// outside the communicator: the receiver reports the peer's abort instead.
func TestAbortNamesImpossibleRank(t *testing.T) {
	w := newWorld(t, 2, 1)
	server := w.transport(1)
	c, err := net.Dial("tcp", w.addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if rep, err := rawHandshake(c, 0, 1, 2, 1, nil); err != nil || rep.Status != wire.ReplyAccept {
		t.Fatalf("handshake: %+v, %v", rep, err)
	}
	c.Write(wire.AppendLostAbortFrame(nil, "lost someone", 7))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fp := fpFor(1, 4)
	err = server.Recv(ctx, 0, &fp, make([]byte, 4))
	var perr *errs.PeerError
	if !errors.As(err, &perr) || perr.Peer != 0 || !errors.Is(err, errs.ErrAborted) || errors.Is(err, errs.ErrPeerLost) {
		t.Fatalf("Recv after an abort naming rank 7 of 2: %v, want rank 0's abort", err)
	}
}
