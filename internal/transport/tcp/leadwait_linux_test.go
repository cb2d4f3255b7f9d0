package tcp

import (
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// TestLeadWait checks the receive gate's wait for its lead: it returns
// when the lead has bytes (leaving them unread), is woken by wakeWatch,
// pokeLead and a dead gate, follows a move of the lead, and a wake-up
// and wait allocate nothing.
func TestLeadWait(t *testing.T) {
	var sending atomic.Int32
	c, remote := tcpPair(t, time.Microsecond, &sending)
	c2, remote2 := tcpPair(t, time.Microsecond, &sending)
	g := &gate{}
	g.setConns([]*conn{c, c2})
	woken := func(what string) {
		t.Helper()
		ok, err := g.waitLead(g.leadc)
		if !ok || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("after %s: waitLead = %v, %v; want a deadline error", what, ok, err)
		}
		g.restoreLead()
	}
	ready := func(what string) {
		t.Helper()
		if ok, err := g.waitLead(g.leadc); !ok || err != nil {
			t.Fatalf("after %s: waitLead = %v, %v; want it ready", what, ok, err)
		}
	}

	// A wake-up before the wait is kept for it, as a deadline is.
	g.wakeWatch(true)
	woken("wakeWatch(true)")
	g.wakeWatch(false)
	woken("wakeWatch(false)")
	g.pokeLead()
	woken("pokeLead")

	// A wake-up while it waits.
	done := make(chan error, 1)
	go func() {
		_, err := g.waitLead(c)
		done <- err
	}()
	g.wakeWatch(true)
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a wait woken while it waits: %v", err)
	}
	g.restoreLead()

	// Bytes on the lead end the wait, and stay to be read.
	go func() {
		_, err := g.waitLead(c)
		done <- err
	}()
	if _, err := remote.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("a wait for bytes that came: %v", err)
	}
	ready("bytes unread")
	var b [1]byte
	if _, err := c.nc.Read(b[:]); err != nil || b[0] != 'x' {
		t.Fatalf("read after the wait: %q, %v", b[:], err)
	}

	if n := testing.AllocsPerRun(100, func() {
		g.wakeWatch(true)
		g.waitLead(c)
		g.restoreLead()
	}); n != 0 {
		t.Errorf("a wake-up and wait allocate %.1f times", n)
	}

	// The lead moves: the wait watches the new one only.
	g.setLead(c2)
	if _, err := remote.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := remote2.Write([]byte("z")); err != nil {
		t.Fatal(err)
	}
	ready("bytes on the new lead")
	if _, err := c2.nc.Read(b[:]); err != nil || b[0] != 'z' {
		t.Fatalf("read of the new lead: %q, %v", b[:], err)
	}
	g.wakeWatch(true)
	woken("wakeWatch(true) with bytes on the old lead only")

	// A dead gate wakes it for good; closing it ends it.
	g.kill()
	ok, err := g.waitLead(c2)
	if !ok || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("on a dead gate: waitLead = %v, %v", ok, err)
	}
	g.closeWait()
	if ok, err := g.waitLead(c2); ok {
		t.Fatalf("after closeWait: waitLead = %v, %v; want no wait", ok, err)
	}
}
