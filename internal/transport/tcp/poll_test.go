//go:build unix

package tcp

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection; the reading
// end is wrapped as a conn with polled reads of up to pollFor.
func tcpPair(t *testing.T, pollFor time.Duration, sending *atomic.Int32) (*conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := newConn(r, 0, false, 0)
	c.setPoll(pollFor, false, sending)
	if c.raw == nil {
		t.Fatal("polled reads not enabled on a TCP connection")
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return c, w
}

// TestReadPolled feeds a polled read in pieces separated by gaps shorter
// and longer than the polling time, and checks it gets every byte, ends of
// stream and deadlines like io.ReadFull on the connection would.
func TestReadPolled(t *testing.T) {
	var sending atomic.Int32
	for _, tc := range []struct {
		name    string
		gap     time.Duration // between pieces
		sending int32
	}{
		{"no gap", 0, 0},
		{"gaps within the poll", 5 * time.Microsecond, 0},
		{"gaps beyond the poll", 3 * time.Millisecond, 0},
		{"a send elsewhere", time.Millisecond, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sending.Store(tc.sending)
			defer sending.Store(0)
			c, w := tcpPair(t, 200*time.Microsecond, &sending)
			want := make([]byte, 100000)
			fill(want, 1, 2)
			go func() {
				for off := 0; off < len(want); off += 7919 {
					w.Write(want[off:min(off+7919, len(want))])
					if tc.gap > 0 {
						time.Sleep(tc.gap)
					}
				}
			}()
			got := make([]byte, len(want))
			n, err := c.readPolled(got)
			if err != nil || n != len(want) {
				t.Fatalf("readPolled = %d, %v; want %d, nil", n, err, len(want))
			}
			if err := check(got, 1, 2); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("end of stream", func(t *testing.T) {
		c, w := tcpPair(t, time.Millisecond, &sending)
		w.Write([]byte("abc"))
		w.Close()
		b := make([]byte, 10)
		n, err := c.readPolled(b)
		if n != 3 || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut short: %d, %v; want 3, ErrUnexpectedEOF", n, err)
		}
		c2, w2 := tcpPair(t, time.Millisecond, &sending)
		w2.Close()
		if n, err := c2.readPolled(b); n != 0 || !errors.Is(err, io.EOF) {
			t.Errorf("closed: %d, %v; want 0, EOF", n, err)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		c, _ := tcpPair(t, 100*time.Microsecond, &sending)
		start := time.Now()
		c.nc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := c.readPolled(make([]byte, 8))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("readPolled = %v, want a deadline error", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("the deadline took %v to interrupt the read", d)
		}
	})
}

// TestReadRestPolled checks that the rest of a frame whose header was read
// polled is read polled too: once the bytes taken ahead with the header
// are used up, one Read waits for all of the rest, however it comes in
// pieces (a plain read would return the first piece and wait in the
// network poller for the next). The rest is written only once the header
// was read, so that what the header's read took ahead is the first write's
// 1000 bytes however late the reader runs.
func TestReadRestPolled(t *testing.T) {
	var sending atomic.Int32
	c, w := tcpPair(t, time.Second, &sending)
	want := make([]byte, 16+50000)
	fill(want, 3, 4)
	headerRead, stop := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		w.Write(want[:16+1000])
		select {
		case <-headerRead:
		case <-stop:
			return
		}
		for off := 16 + 1000; off < len(want); off += 7919 {
			time.Sleep(time.Millisecond)
			w.Write(want[off:min(off+7919, len(want))])
		}
	}()
	got := make([]byte, len(want))
	if n, err := c.readPolled(got[:16]); n != 16 || err != nil {
		t.Fatalf("header: readPolled = %d, %v", n, err)
	}
	close(headerRead)
	rest := got[16:]
	n, err := c.Read(rest) // what came with the header
	if err != nil || n == 0 || n > 1000 {
		t.Fatalf("Read of the bytes taken ahead = %d, %v; want 1-1000, nil", n, err)
	}
	m, err := c.Read(rest[n:])
	if err != nil || m != len(rest)-n {
		t.Fatalf("Read of the rest = %d, %v; want %d, nil", m, err, len(rest)-n)
	}
	if err := check(got, 3, 4); err != nil {
		t.Fatal(err)
	}
}
