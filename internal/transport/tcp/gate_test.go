package tcp

import (
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// deadlineCounter counts the socket deadlines set on a connection.
type deadlineCounter struct {
	net.Conn
	set atomic.Int64
}

func (d *deadlineCounter) SetReadDeadline(t time.Time) error {
	d.set.Add(1)
	return d.Conn.SetReadDeadline(t)
}

func (d *deadlineCounter) SetWriteDeadline(t time.Time) error {
	d.set.Add(1)
	return d.Conn.SetWriteDeadline(t)
}

// TestGateDeadlines checks that calls whose contexts carry deadlines of
// their own (a communicator's calls each have one) set no socket deadline
// call after call, and that a call's context still interrupts its I/O
// when its deadline passes.
func TestGateDeadlines(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	counted := &deadlineCounter{Conn: r}
	c := newConn(counted, 0, false, 0)
	for _, write := range []bool{true, false} {
		g := &gate{write: write}
		g.setConns([]*conn{c})
		counted.set.Store(0)
		start := time.Now()
		for i := range 100 {
			ctx, cancel := context.WithDeadline(context.Background(), start.Add(time.Hour+time.Duration(i)))
			if !g.enter(ctx) {
				t.Fatal("enter: the gate is dead")
			}
			g.exit()
			cancel()
		}
		if n := counted.set.Load(); n > 2 {
			t.Errorf("write %v: 100 calls with deadlines of their own set %d socket deadlines, want at most 2", write, n)
		}
	}

	// The deadline still ends a read that waits for bytes that never come.
	g := &gate{}
	g.setConns([]*conn{c})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if !g.enter(ctx) {
		t.Fatal("enter: the gate is dead")
	}
	done := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := c.nc.Read(b[:])
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a read past the call's deadline: %v, want a deadline error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a read past the call's deadline was not interrupted")
	}
	g.exit()
}
