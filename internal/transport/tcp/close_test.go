package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
)

// heldListener wraps a listener so that the test decides when the reads of
// the accepted connections on one address may go on (see heldConn).
type heldListener struct {
	net.Listener
	held   string        // local IP whose connections' reads are held
	armed  atomic.Bool   // hold from now on
	free   chan struct{} // closed: held reads go on
	once   sync.Once
	onEOF  func() // called once a connection not held reads the end of its stream
	eofSaw atomic.Bool
}

func (l *heldListener) release() { l.once.Do(func() { close(l.free) }) }

func (l *heldListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := nc.(*net.TCPConn)
	held := tc.LocalAddr().(*net.TCPAddr).IP.String() == l.held
	return &heldConn{TCPConn: tc, l: l, held: held}, nil
}

// heldConn is an accepted connection whose reads wait, once its listener
// is armed, until the test frees them (held), or that tells the test when
// it reads the end of the stream (the others).
type heldConn struct {
	*net.TCPConn
	l    *heldListener
	held bool
}

// SyscallConn hides the descriptor, so that the transport's polled reads,
// which go around Read, are off and every read passes the hold above.
func (c *heldConn) SyscallConn() (syscall.RawConn, error) {
	return nil, errors.ErrUnsupported
}

func (c *heldConn) Read(b []byte) (int, error) {
	if c.held && c.l.armed.Load() {
		<-c.l.free
	}
	n, err := c.TCPConn.Read(b)
	if !c.held && err == io.EOF && c.l.armed.Load() && c.l.eofSaw.CompareAndSwap(false, true) {
		c.l.onEOF()
	}
	return n, err
}

// TestCloseAfterLastMessage: a rank that sends its last message striped
// over two paths and closes at once must not fail the peer still receiving
// it. The peer's stripe on path 1 is held until the peer has read the end
// of path 0's stream (the sender's close), the order that made the
// receive's watch for repairs on path 0 take the end of the stream for a
// lost connection.
func TestCloseAfterLastMessage(t *testing.T) {
	for _, nsocks := range []int{1, 2} {
		t.Run(fmt.Sprintf("nsocks=%d", nsocks), func(t *testing.T) {
			var hl *heldListener
			wrap := func(r int, ln net.Listener) net.Listener {
				if r != 1 {
					return ln
				}
				hl = &heldListener{Listener: ln, held: "127.0.0.2", free: make(chan struct{})}
				hl.onEOF = hl.release
				return hl
			}
			trs, _ := multiPathWorldWrap(t, 2, nsocks, wrap, "127.0.0.1:%d", "127.0.0.2:%d")
			t.Cleanup(hl.release) // before the transports close
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			runAll(t, trs, func(tr *Transport) error { return tr.Connect(ctx, []int{1 - tr.rank}) })
			hl.armed.Store(true)

			// Small enough for the receiver's socket to take all of path 1's
			// stripe while nothing reads it, so the Send returns.
			const n = stripeMin
			out, in := make([]byte, n), make([]byte, n)
			fill(out, 0, 1)
			fp := fpFor(1, n)
			recvd := make(chan error, 1)
			go func() { recvd <- trs[1].Recv(ctx, 0, &fp, in) }()
			if err := trs[0].Send(ctx, 1, &fp, out); err != nil {
				t.Fatal(err)
			}
			if err := trs[0].Close(); err != nil {
				t.Fatal(err)
			}
			if err := <-recvd; err != nil {
				t.Fatalf("receive of the last message from a rank that closed after sending it: %v", err)
			}
			if err := check(in, 0, 1); err != nil {
				t.Fatal(err)
			}
			if !hl.eofSaw.Load() {
				t.Error("the receive never read the end of path 0's stream: the test did not force the order it is about")
			}
			// The pair is gone now, and says so.
			fp2 := fpFor(2, 8)
			if err := trs[1].Recv(ctx, 0, &fp2, make([]byte, 8)); !errors.Is(err, errs.ErrPeerLost) {
				t.Errorf("receive from a rank that closed: %v, want ErrPeerLost", err)
			}
		})
	}
}
