package tcp

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
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
// again on path 0, and that both ends retire path 1 and stop using it.
func TestFailoverRepair(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep int // payload bytes of the cut stripes that still go out
	}{{"part", 1000}, {"none", 0}, {"all", 1 << 30}} {
		for _, nsocks := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/nsocks=%d", tc.name, nsocks), func(t *testing.T) {
				trs, logs := multiPathWorld(t, 2, nsocks, "127.0.0.1:%d", "127.0.0.2:%d")
				const cutSeq = 4 // a 4 MiB message
				var cuts atomic.Int32
				trs[0].testSend = func(c *conn, fp wire.Fingerprint, off uint64, part []byte) (int64, error) {
					if c.path.idx == 1 && fp.Seq == cutSeq {
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
					t.Fatal(err)
				}
				if cuts.Load() == 0 {
					t.Fatal("no stripe was cut")
				}
				for r, tr := range trs {
					for _, s := range tr.Paths() {
						if s.Path == 1 && !s.Retired {
							t.Errorf("rank %d: path 1 not retired: %v", r, s)
						}
						if s.Path == 0 && s.Retired {
							t.Errorf("rank %d: path 0 retired: %v", r, s)
						}
					}
				}
				if !strings.Contains(logs.String(), "path stopped") {
					t.Errorf("no log line for the stopped path:\n%s", logs.String())
				}
				// Later messages avoid path 1 both ways.
				before := pathSent(trs, 1)
				out, in := make([]byte, 4<<20), make([]byte, 4<<20)
				for r := range 2 {
					fp := fpFor(100+r, len(out))
					fill(out, r, 100+r)
					done := make(chan error, 1)
					go func() { done <- trs[r].Send(ctx, 1-r, &fp, out) }()
					if err := errors.Join(trs[1-r].Recv(ctx, r, &fp, in), <-done); err != nil {
						t.Fatal(err)
					}
					if err := check(in, r, 100+r); err != nil {
						t.Fatal(err)
					}
				}
				if after := pathSent(trs, 1); after != before {
					t.Errorf("path 1 carried %d bytes after it was retired", after-before)
				}
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
