package tcp

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/wire"
)

var errTestCut = errors.New("test: path cut")

// writeCut writes the header of a stripe frame and the first keep bytes of
// its payload, then leaves the connection as a link that stopped would: the
// rest never comes, and the write reports a failure.
func (c *conn) writeCut(fp *wire.Fingerprint, off uint64, part []byte, keep int) (int64, error) {
	keep = min(keep, len(part))
	c.wmu.Lock()
	defer c.wmu.Unlock()
	h := wire.FrameHeader{Type: wire.FrameStripe, Len: uint64(len(part)), Offset: off, Fingerprint: *fp}
	if c.crc {
		h.Flags, h.Checksum = wire.FlagCRC32C, crc32.Checksum(part, castagnoli)
	}
	var hb [wire.FrameHeaderSize]byte
	h.MarshalTo(hb[:])
	n, err := c.nc.Write(hb[:])
	if err == nil {
		var m int
		m, err = c.nc.Write(part[:keep])
		n += m
	}
	c.wbroken = true
	if err == nil {
		err = errTestCut
	}
	return int64(n), err
}

// TestFailoverRepair cuts path 1 under the stripes of one message (part
// way through them, or after all of them went out) and checks that every
// message still arrives whole and right both ways, that the stripes went
// again on path 0, and that path 1, dialed again, comes back into use
// both ways.
func TestFailoverRepair(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep int // payload bytes of the cut stripes that still go out
		path int // the path cut
	}{{"part", 1000, 1}, {"none", 0, 1}, {"all", 1 << 30, 1},
		// The lead's own path, on its second socket: the lead
		// moves to path 1, and the stripe goes again there.
		{"lead path", 1000, 0}} {
		for _, nsocks := range []int{1, 2} {
			if tc.path == 0 && nsocks == 1 {
				continue // (no stripe travels on the lead's path)
			}
			t.Run(fmt.Sprintf("%s/nsocks=%d", tc.name, nsocks), func(t *testing.T) {
				trs, logs := multiPathWorld(t, 2, nsocks, "127.0.0.1:%d", "127.0.0.2:%d")
				const cutSeq = 4 // a 4 MiB message
				var cuts atomic.Int32
				trs[0].testSend = func(c *conn, fp wire.Fingerprint, off uint64, part []byte) (int64, error) {
					if c.path.idx == tc.path && fp.Seq == cutSeq {
						cuts.Add(1)
						return c.writeCut(&fp, off, part, tc.keep)
					}
					return c.writeStripe(&fp, off, part, 0)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				sizes := []int{4 << 20, 1<<20 + 3, stripeMin, 100}
				const rounds = 8
				var wg sync.WaitGroup
				errc := make(chan error, 2)
				for r := range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						tr, peer := trs[r], 1-r
						for seq := range rounds {
							n := sizes[seq%len(sizes)]
							fp := fpFor(seq, n)
							out, in := make([]byte, n), make([]byte, n)
							fill(out, r, seq)
							var serr error
							done := make(chan struct{})
							go func() { defer close(done); serr = tr.Send(ctx, peer, &fp, out) }()
							rerr := tr.Recv(ctx, peer, &fp, in)
							<-done
							if err := errors.Join(serr, rerr); err != nil {
								errc <- fmt.Errorf("rank %d, message %d of %d bytes: %v", r, seq, n, err)
								return
							}
							if err := check(in, peer, seq); err != nil {
								errc <- fmt.Errorf("rank %d, message %d of %d bytes: %v", r, seq, n, err)
								return
							}
						}
					}()
				}
				wg.Wait()
				close(errc)
				for err := range errc {
					t.Fatalf("%v\n%s", err, logs)
				}
				if cuts.Load() == 0 {
					t.Fatal("no stripe was cut")
				}
				if tc.path == 0 && !strings.Contains(logs.String(), "the lead stream moves to another path") {
					t.Errorf("the lead did not move off the path of the cut stripe:\n%s", logs)
				}
				checkReturns(t, trs, logs, tc.path)
			})
		}
	}
}

// pathSent sums the bytes sent on path p by every transport.
func pathSent(trs []*Transport, p int) uint64 {
	var n uint64
	for _, tr := range trs {
		for _, s := range tr.Paths() {
			if s.Path == p {
				n += s.Sent
			}
		}
	}
	return n
}

// TestFailoverBadRepairs: stripe frames a peer has no business sending at
// a message boundary fail the receive with a protocol error naming them,
// and a stale repair of a path is discarded.
func TestFailoverBadRepairs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths uint16
		want  string // "" for a repair that is discarded
	}{
		{"stale repair", 2, ""},
		{"plain stripe", 0, "repair for paths 0x0"},
		{"repair of path 0", 1, "repair for paths 0x1"},
		{"repair of an unknown path", 4, "repair for paths 0x4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trs, _ := multiPathWorld(t, 2, 1, "127.0.0.1:%d", "127.0.0.2:%d")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			berr := make(chan error, 1)
			go func() { berr <- barrier2(ctx, trs[1], 0) }()
			if err := errors.Join(barrier2(ctx, trs[0], 1), <-berr); err != nil {
				t.Fatal(err)
			}
			pr, err := trs[0].connected(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			fp := fpFor(7, 8)
			if _, err := pr.conns[0].writeStripe(&fp, 0, []byte("12345678"), tc.paths); err != nil {
				t.Fatal(err)
			}
			msg := []byte("hello")
			mfp := fpFor(8, len(msg))
			go trs[0].Send(ctx, 1, &mfp, msg)
			got := make([]byte, len(msg))
			err = trs[1].Recv(ctx, 0, &mfp, got)
			if tc.want == "" {
				if err != nil || string(got) != "hello" {
					t.Fatalf("Recv after a stale repair: %v, %q", err, got)
				}
				for _, s := range trs[1].Paths() {
					if s.Path == 1 && !s.Retired {
						t.Errorf("path 1 not retired after its repair: %v", s)
					}
				}
				return
			}
			if err == nil || !errors.Is(err, errProtocol) && !strings.Contains(err.Error(), "protocol violation") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Recv: %v, want a protocol violation with %q", err, tc.want)
			}
		})
	}
}

// TestFailoverRepairAfterAnswer forces the interleaving where the worker
// receiving a stripe has already answered (its connection failed) when the
// repair of that stripe arrives: the sender writes the repair only once the
// receive has taken that answer. The repair must not wait for the worker a
// second time.
func TestFailoverRepairAfterAnswer(t *testing.T) {
	for _, nsocks := range []int{1, 2} {
		t.Run(fmt.Sprintf("nsocks=%d", nsocks), func(t *testing.T) {
			trs, logs := multiPathWorld(t, 2, nsocks, "127.0.0.1:%d", "127.0.0.2:%d")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			const cutSeq = 3
			took := make(chan struct{})
			var tookOnce sync.Once
			trs[1].testTook = func(pos int, err error) {
				if err != nil {
					tookOnce.Do(func() { close(took) })
				}
			}
			var cutOnce sync.Once
			trs[0].testSend = func(c *conn, fp wire.Fingerprint, off uint64, part []byte) (int64, error) {
				if c.path.idx != 1 || fp.Seq != cutSeq {
					return c.writeStripe(&fp, off, part, 0)
				}
				// Part of the stripe, then the end of the stream:
				// the receiving worker fails. The write reports
				// the failure (and the repair goes out) only once
				// the receive took that answer (with two sockets,
				// the path's other stripe fails at once).
				n, err := c.writeCut(&fp, off, part, 1000)
				c.nc.(*net.TCPConn).CloseWrite()
				cut := false
				cutOnce.Do(func() { cut = true })
				if !cut {
					return n, err
				}
				select {
				case <-took:
				case <-ctx.Done():
				}
				return n, err
			}
			sendOne(ctx, t, trs, 0, cutSeq-1, 1<<20)
			sendOne(ctx, t, trs, 0, cutSeq, 1<<20)
			select {
			case <-took:
			default:
				t.Fatal("the receive never took a failed stripe's answer")
			}
			checkReturns(t, trs, logs, 1)
		})
	}
}

// TestFailoverReset resets a stripe's connection from the receiving end
// after the stripe was written whole and before the receiver read it: the
// kernel drops what it held, so the sender must not count the stripe as
// acknowledged but send it again on path 0.
func TestFailoverReset(t *testing.T) {
	trs, logs := multiPathWorld(t, 2, 1, "127.0.0.1:%d", "127.0.0.2:%d")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sendOne(ctx, t, trs, 0, 1, 1<<20) // connected
	pr1, err := trs[1].connected(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	const cutSeq = 2
	reset := make(chan struct{})
	trs[0].testSend = func(c *conn, fp wire.Fingerprint, off uint64, part []byte) (int64, error) {
		n, err := c.writeStripe(&fp, off, part, 0)
		if c.path.idx != 1 || fp.Seq != cutSeq || err != nil {
			return n, err
		}
		// The stripe is in the kernel; the receiver has not started
		// the receive. Reset the connection from its end, and go on
		// once this end has seen the reset.
		rc := pr1.conns[c.pos].nc.(*net.TCPConn)
		rc.SetLinger(0)
		rc.Close()
		for ctx.Err() == nil {
			if _, _, age, ok := sendState(c); !ok || age == time.Duration(math.MaxInt64) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		close(reset)
		return n, err
	}
	// Small enough that the stripes fit the sockets' buffers whole, so
	// the writes complete before the receive starts.
	const n = 96 << 10
	fp := fpFor(cutSeq, n)
	out, in := make([]byte, n), make([]byte, n)
	fill(out, 0, cutSeq)
	serr := make(chan error, 1)
	go func() { serr <- trs[0].Send(ctx, 1, &fp, out) }()
	select {
	case <-reset:
	case err := <-serr:
		t.Fatalf("Send returned before the reset: %v", err)
	}
	if err := errors.Join(trs[1].Recv(ctx, 0, &fp, in), <-serr); err != nil {
		t.Fatal(err)
	}
	if err := check(in, 0, cutSeq); err != nil {
		t.Fatal(err)
	}
	checkReturns(t, trs, logs, 1)
}

// sendOne sends a message of n bytes numbered seq from rank from to the
// other of two ranks and checks what arrives.
func sendOne(ctx context.Context, t *testing.T, trs []*Transport, from, seq, n int) {
	t.Helper()
	to := 1 - from
	fp := fpFor(seq, n)
	out, in := make([]byte, n), make([]byte, n)
	fill(out, from, seq)
	serr := make(chan error, 1)
	go func() { serr <- trs[from].Send(ctx, to, &fp, out) }()
	if err := errors.Join(trs[to].Recv(ctx, from, &fp, in), <-serr); err != nil {
		t.Fatalf("message %d from rank %d: %v", seq, from, err)
	}
	if err := check(in, from, seq); err != nil {
		t.Fatal(err)
	}
}

// checkReturns checks that path 1 was retired (the WARN) and that, dialed
// again, it comes back into use both ways, while messages of every size
// class keep arriving whole; path 0 is never retired.
func checkReturns(t *testing.T, trs []*Transport, logs *syncBuffer, path int) {
	t.Helper()
	if !strings.Contains(logs.String(), "path stopped") {
		t.Errorf("no log line for the stopped path:\n%s", logs.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Per rank, the path's bytes sent when its sends moved to a new
	// generation; done once both sent more on it afterwards.
	var base [2]uint64
	var moved [2]bool
	for i := 0; ; i++ {
		if ctx.Err() != nil {
			t.Fatalf("path %d did not come back into use both ways:\n%v\n%v\n%s", path, trs[0].Paths(), trs[1].Paths(), logs.String())
		}
		for from := range 2 {
			sendOne(ctx, t, trs, from, 1000+2*i+from, []int{8, stripeMin, 2 << 20}[i%3])
		}
		back := 0
		for r, tr := range trs {
			for _, s := range tr.Paths() {
				switch {
				case s.Path == 1-path && (s.Retired || s.Gen != 0):
					t.Fatalf("rank %d: %v", r, s)
				case s.Path != path || s.Retired || s.Gen == 0:
				case !moved[r]:
					moved[r], base[r] = true, s.Sent
				case s.Sent > base[r]:
					back++
				}
			}
		}
		if back == 2 {
			break
		}
	}
	if !strings.Contains(logs.String(), "back in use") {
		t.Errorf("no log line for the path back in use:\n%s", logs.String())
	}
}

// TestRedialRefusals: a listener takes a connection of a new generation
// of a path only once the pair is connected, never for path 0, once per
// socket and generation, and never for a generation older than the newest
// it has.
func TestRedialRefusals(t *testing.T) {
	logEveryRefusal(t)
	trs, logs := multiPathWorld(t, 2, 1, "127.0.0.1:%d", "127.0.0.2:%d")
	addr := trs[0].paths[1][1]
	try := func(socket int, gen uint8) wire.HandshakeReply {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		rep, err := rawHandshake(c, 0, 1, 2, 2, func(h *wire.Handshake) {
			h.Socket, h.Paths, h.Gen = uint16(socket), 3, gen
		})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	for _, tc := range []struct {
		name      string
		socket    int
		gen       uint8
		connected bool
		want      string // "" to be accepted
	}{
		{"before the pair connected", 1, 1, false, "before the pair was connected"},
		{"path 0", 0, 1, true, "dialed path 0 again"},
		{"generation 2", 1, 2, true, ""},
		{"generation 2 again", 1, 2, true, "out of date"},
		{"generation 1", 1, 1, true, "out of date"},
	} {
		if tc.connected {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			berr := make(chan error, 1)
			go func() { berr <- barrier2(ctx, trs[1], 0) }()
			if err := errors.Join(barrier2(ctx, trs[0], 1), <-berr); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
		rep := try(tc.socket, tc.gen)
		switch {
		case tc.want == "" && rep.Status != wire.ReplyAccept:
			t.Errorf("%s: %s %q, want accepted", tc.name, rep.Status, rep.Reason)
		case tc.want != "" && (rep.Status != wire.ReplyRefuse || !strings.Contains(rep.Reason, tc.want)):
			t.Errorf("%s: %s %q, want refused with %q", tc.name, rep.Status, rep.Reason, tc.want)
		}
		if tc.want == "" {
			// The listener answers before it takes the connection
			// in (acceptGen): the next case dials once it did, as
			// a dialer that never dials a generation twice at once
			// would.
			pr := trs[1].peers[0]
			for deadline := time.Now().Add(20 * time.Second); pr.checkGen(tc.socket, tc.gen) == ""; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: rank 1 never took the connection in", tc.name)
				}
			}
		}
	}
	if !strings.Contains(logs.String(), "out of date") {
		t.Errorf("the refusals were not logged:\n%s", logs.String())
	}
}

// TestRedialLateAnswer: the dialing of a retired path's first new
// generation fails after the listener took it (as when the answer comes
// after the attempt's bound, under load). The listener moves its sends on
// the path to that generation; the dialer, which never has it, reads the
// path's stripes as failed and takes their repairs, and the path comes
// back on the next generation. (The dialer's receive used to wait for the
// lost generation until its context ended.)
func TestRedialLateAnswer(t *testing.T) {
	trs, logs := multiPathWorld(t, 2, 1, "127.0.0.1:%d", "127.0.0.2:%d")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const cutSeq = 2
	trs[0].testSend = func(c *conn, fp wire.Fingerprint, off uint64, part []byte) (int64, error) {
		if c.path.idx == 1 && fp.Seq == cutSeq {
			return c.writeCut(&fp, off, part, 0)
		}
		return c.writeStripe(&fp, off, part, 0)
	}
	pr1 := trs[1].peers[0]
	// until polls rank 1's side of the pair until cond holds.
	until := func(what string, cond func() bool) {
		t.Helper()
		for {
			pr1.mu.Lock()
			ok := cond()
			pr1.mu.Unlock()
			if ok {
				return
			}
			if ctx.Err() != nil {
				t.Errorf("rank 1 never %s:\n%s", what, logs)
				return
			}
			time.Sleep(time.Millisecond) // polls a condition; acts only once it holds
		}
	}
	trs[0].testRedial = func(k int, gen uint8) bool {
		if gen == 1 {
			return true
		}
		// The next generation once rank 1 sends on the lost one.
		until("sent on generation 1", func() bool { return pr1.sgen[1] >= 1 })
		return false
	}
	sendOne(ctx, t, trs, 0, cutSeq-1, 1<<20)
	sendOne(ctx, t, trs, 0, cutSeq, 1<<20)
	until("took generation 1", func() bool {
		g := pr1.findGen(1, 1)
		return g != nil && g.complete()
	})
	// Rank 1 moves its sends on path 1 to generation 1 and tells rank 0.
	sendOne(ctx, t, trs, 1, cutSeq+1, 1<<20)
	if !strings.Contains(logs.String(), "did not connect here") {
		t.Errorf("rank 0 did not take the move to the generation it lost:\n%s", logs)
	}
	checkReturns(t, trs, logs, 1)
}
