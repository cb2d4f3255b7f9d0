package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// oldVersion is the protocol version of the build before this one's: the
// same handshake and frames, a window Get's reply on the window's own
// transport, not on a second one.
const oldVersion = wire.HandshakeVersion - 1

// wantVersionError checks that err reports, at once (not a timeout), that
// peer speaks oldVersion: a *wire.VersionError naming both versions,
// wrapped in a lost peer.
func wantVersionError(t *testing.T, err error, peer int) {
	t.Helper()
	var ve *wire.VersionError
	var pe *errs.PeerError
	switch {
	case !errors.As(err, &ve) || ve.Local != wire.HandshakeVersion || ve.Remote != oldVersion:
		t.Fatalf("err = %v, want a wire.VersionError{Local: %d, Remote: %d}", err, wire.HandshakeVersion, oldVersion)
	case !errors.Is(err, wire.ErrVersion) || !errors.Is(err, errs.ErrPeerLost) || errors.Is(err, errs.ErrTimeout):
		t.Fatalf("err = %v, want ErrVersion and ErrPeerLost, not a timeout", err)
	case !errors.As(err, &pe) || pe.Peer != peer:
		t.Fatalf("err = %v, want it to name rank %d", err, peer)
	}
	msg := err.Error()
	for _, v := range []int{oldVersion, wire.HandshakeVersion} {
		if !strings.Contains(msg, fmt.Sprintf("version %d", v)) {
			t.Errorf("%q does not name version %d", msg, v)
		}
	}
}

// dialRaw opens a connection to addr, closed when the test ends, every
// read and write bounded.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// TestVersionOlderDialer has a rank of the previous protocol version dial
// a listener of this one: a stranger claiming that version proves nothing
// and changes nothing; the proven rank is refused with a proof and a
// reason naming both versions, and the listener's Connect fails at once
// with a VersionError, before any frame could be misread.
func TestVersionOlderDialer(t *testing.T) {
	logEveryRefusal(t)
	w := newWorld(t, 2, 1)
	listener := w.transport(1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	old := func(h *wire.Handshake) { h.Version = oldVersion }

	wrongKey := wire.HandshakeKey(&[32]byte{'i', 'm', 'p'}, "")
	rep, err := rawHandshakeKey(dialRaw(t, w.addrs[1]), &wrongKey, 0, 1, 2, 1, old)
	if err != nil || rep.Status != wire.ReplyRefuse || rep.Reason != errUnauthenticated || rep.Version != oldVersion {
		t.Fatalf("stranger of version %d: %+v, %v; want an unproven refusal in its version", oldVersion, rep, err)
	}
	if f := listener.peers[0].failure.Load(); f != nil {
		t.Fatalf("a stranger claiming rank 0 in another version failed the pair: %v", *f)
	}

	rep, err = rawHandshake(dialRaw(t, w.addrs[1]), 0, 1, 2, 1, old)
	if err != nil || rep.Status != wire.ReplyRefuse || rep.Version != oldVersion ||
		!strings.Contains(rep.Reason, fmt.Sprintf("version %d", oldVersion)) || !strings.Contains(rep.Reason, fmt.Sprintf("version %d", wire.HandshakeVersion)) {
		t.Fatalf("rank 0 of version %d: %+v, %v; want a proven refusal naming both versions", oldVersion, rep, err)
	}
	if got := versionRefusal(strings.Replace(rep.Reason, fmt.Sprint(oldVersion), fmt.Sprint(wire.HandshakeVersion), 1)); got == nil {
		t.Errorf("a dialer of this version would not take %q for a version refusal", rep.Reason)
	}
	wantVersionError(t, listener.Connect(ctx, []int{0}), 0)
}

// TestVersionOlderListener has a rank of this protocol version dial a
// listener of the previous one, which refuses a handshake of another
// version at once, unproven, in its own version: Connect fails at once
// with a VersionError naming both versions, and shows what it said.
func TestVersionOlderListener(t *testing.T) {
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
				b := make([]byte, wire.HandshakeSize)
				if _, err := io.ReadFull(c, b); err != nil {
					return
				}
				// What a build of the previous version answers.
				rep := wire.HandshakeReply{Version: oldVersion, Status: wire.ReplyRefuse, Reason: fmt.Sprintf(
					"malformed handshake: wire: handshake version %d, want %d: wire: malformed message", b[4], oldVersion)}
				c.Write(rep.AppendTo(nil))
			}()
		}
	}()
	dialer := w.transport(0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := dialer.Connect(ctx, []int{1})
	wantVersionError(t, err, 1)
	if !strings.Contains(err.Error(), fmt.Sprintf("want %d", oldVersion)) {
		t.Errorf("%q does not show the listener's answer", err)
	}
}
