package tcp

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// queued returns how many received bytes wait unread in nc's socket.
func queued(t *testing.T, nc net.Conn) int {
	t.Helper()
	raw, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	raw.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sockInt reads an integer socket option of nc at SOL_SOCKET.
func sockInt(nc net.Conn, opt int) (int, error) {
	raw, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var v int
	cerr := raw.Control(func(fd uintptr) { v, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, opt) })
	if cerr != nil {
		return 0, cerr
	}
	return v, err
}

// TestCloseWithUnreadData: a rank that closes with data from its peer
// still unread must not reset the connection, which would throw away the
// tail of its own last message, still in its socket's send buffer while
// the peer reads it.
func TestCloseWithUnreadData(t *testing.T) {
	w := newWorld(t, 2, 1)
	tr0, tr1 := w.transport(0), w.transport(1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runAll(t, []*Transport{tr0, tr1}, func(tr *Transport) error { return barrier2(ctx, tr, 1-tr.Rank()) })
	c0, c1 := tr0.peers[1].conns[0], tr1.peers[0].conns[0]
	// Most of the last message stays in rank 0's send buffer while rank 1
	// reads it.
	c0.nc.(*net.TCPConn).SetWriteBuffer(8 << 20)
	c1.nc.(*net.TCPConn).SetReadBuffer(64 << 10)

	// A message rank 0 never reads, in its socket before it closes.
	fp := fpFor(1, 100)
	if err := tr1.Send(ctx, 0, &fp, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	for queued(t, c0.nc) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the message never reached rank 0's socket")
		}
		runtime.Gosched()
	}
	// As large as rank 0's send buffer holds (the kernel caps the size
	// asked for at net.core.wmem_max), so the Send returns before rank 1
	// reads while most of the message still waits in that buffer.
	sndbuf, err := sockInt(c0.nc, unix.SO_SNDBUF)
	if err != nil {
		t.Fatal(err)
	}
	n := min(4<<20, sndbuf/2)
	out, in := make([]byte, n), make([]byte, n)
	fill(out, 0, 2)
	fp = fpFor(2, n)
	if err := tr0.Send(ctx, 1, &fp, out); err != nil {
		t.Fatal(err)
	}
	if err := tr0.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr1.Recv(ctx, 0, &fp, in); err != nil {
		t.Fatalf("receive of the last message of a rank that closed with unread data: %v", err)
	}
	if err := check(in, 0, 2); err != nil {
		t.Fatal(err)
	}
}
