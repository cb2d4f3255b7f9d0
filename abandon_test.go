package hcomm

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/wire"
	"github.com/hcomm-go/hcomm/internal/zcopy"
)

// corruptRecord wraps a rank's transport so that its first zero-copy
// record (a message of zcopy.RecSize bytes) goes out with a bad magic, as
// a corrupted or hostile peer's would. It keeps the transport's eager
// sends and probes, so the zero-copy path runs as it does in production.
type corruptRecord struct {
	transport.Transport
	done bool
}

func (c *corruptRecord) bad(p []byte) []byte {
	if c.done || len(p) != zcopy.RecSize {
		return p
	}
	c.done = true
	q := append([]byte(nil), p...)
	q[0]++
	return q
}

func (c *corruptRecord) Send(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) error {
	return c.Transport.Send(ctx, peer, fp, c.bad(p))
}

func (c *corruptRecord) TrySend(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) (bool, error) {
	eg, ok := c.Transport.(transport.Eager)
	if !ok {
		return false, nil
	}
	q := c.bad(p)
	sent, err := eg.TrySend(ctx, peer, fp, q)
	if !sent && len(q) > 0 && &q[0] != &p[0] {
		c.done = false // not sent: the next attempt is corrupted instead
	}
	return sent, err
}

func (c *corruptRecord) Arrived(peer int) bool {
	pr, ok := c.Transport.(transport.Prober)
	return ok && pr.Arrived(peer)
}

// rankAllocAbandon: two rank processes over shm run a zero-copy AllGather
// on registered memory; rank 1's first record to rank 0 is malformed.
// Rank 0 cannot tell what rank 1 decided, so it abandons the call (its
// abandon record goes out by the transport's eager send, across the
// processes' ring) and fails with ErrInvalidArgument; rank 1, which took
// the path and waits for rank 0's "done", fails on the abandon record (or
// on rank 0's abort of the communicator) instead of waiting for its
// deadline (HCOMM_TEST_TIMEOUT: a guard, not a bound: a rank that waited
// for it reports a timeout, which fails the test).
func rankAllocAbandon(t *testing.T, c *Comm) {
	ctx := context.Background()
	b, err := c.Alloc(ctx, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	buf := b.Bytes()
	n := c.Size()
	blk := len(buf) / n / 2
	for i := range buf[:blk] {
		buf[i] = byte(c.Rank() + i)
	}
	// A clean call first: the path is taken and the ranks agree.
	if err := c.AllGatherBytes(ctx, buf[:blk], buf[len(buf)-n*blk:], DTypeUint8); err != nil {
		t.Fatal(err)
	}
	if c.ZeroCopyCalls() != 1 {
		t.Fatalf("rank %d: %d zero-copy calls, want 1", c.Rank(), c.ZeroCopyCalls())
	}
	if c.Rank() == 1 {
		c.path.Mu.Lock()
		c.path.ZeroCopyT = &corruptRecord{Transport: c.path.T}
		c.path.Mu.Unlock()
	}
	start := time.Now()
	err = c.AllGatherBytes(ctx, buf[:blk], buf[len(buf)-n*blk:], DTypeUint8)
	survivorLine(c, err, time.Since(start))
	_ = b.Free(ctx)
}

func TestAllocAbandonProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skip("no /dev/shm")
	}
	out, surv, err := faultJob(t, 2, "allocabandon", "HCOMM_TRANSPORT=shm", "HCOMM_ZERO_COPY=1", "HCOMM_TEST_TIMEOUT=2m")
	if err != nil {
		t.Fatalf("job: %v\n%s", err, lastLines(out, 40))
	}
	for r := range 2 {
		if _, ok := surv[r]; !ok {
			t.Fatalf("rank %d did not report:\n%s", r, lastLines(out, 40))
		}
	}
	if s := surv[0]; s["kind"] != "other" || !strings.Contains(s["err"], "malformed zero-copy record") || !strings.Contains(s["err"], "invalid argument") {
		t.Errorf("rank 0 (received the malformed record): %s: %s", s["kind"], s["err"])
	}
	// Rank 1 fails on rank 0's abandon record or on its abort of the
	// communicator, whichever it sees first (without abandon the abort
	// alone releases it: both were seen), naming rank 0's reason; not on
	// its deadline.
	if s := surv[1]; s["kind"] != "aborted" || !strings.Contains(s["err"], "peer 0") ||
		!strings.Contains(s["err"], "abandoned the zero-copy call") && !strings.Contains(s["err"], "malformed zero-copy record") {
		t.Errorf("rank 1 (sent it): %s: %s", s["kind"], s["err"])
	}
	t.Logf("rank 1: %s", surv[1]["err"])
}
