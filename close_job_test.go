package hcomm

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/store"
)

// jobPair makes two ranks of a job in this process (a file store, the
// given transport).
func jobPair(t *testing.T, ctx context.Context, transport string) [2]*Comm {
	t.Helper()
	fs, err := store.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	var comms [2]*Comm
	var errs [2]error
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			comms[r], errs[r] = Init(ctx, &Config{Rank: r, Size: 2, Rendezvous: fs, Token: "pair", Transport: transport, Timeout: time.Minute})
		})
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { comms[1].Close() })
	return comms
}

// TestCloseNotAFailure: a rank that closes its communicator with a
// collective running (the executor's op fails on the closed transport) or
// with one still queued on a stream (the stream's Close skips it) has not
// failed: the peer sees it as lost (ErrPeerLost), as Close documents, not
// as a rank that aborted (a failure note in the store).
func TestCloseNotAFailure(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	peerSees := func(t *testing.T, c *Comm) {
		t.Helper()
		b := make([]float32, 1<<18)
		err := AllReduce(ctx, c, b, b, Sum)
		if !errors.Is(err, ErrPeerLost) || errors.Is(err, ErrAborted) {
			t.Errorf("rank 1 after rank 0 closed: %v (Is ErrPeerLost %v, Is ErrAborted %v)", err, errors.Is(err, ErrPeerLost), errors.Is(err, ErrAborted))
		}
	}
	t.Run("running", func(t *testing.T) {
		comms := jobPair(t, ctx, "tcp")
		done := make(chan error, 1)
		go func() {
			b := make([]float32, 1<<18)
			done <- AllReduce(ctx, comms[0], b, b, Sum) // rank 1 is not there yet
		}()
		if err := waitRunning(comms[0], 1); err != nil {
			t.Fatal(err)
		}
		comms[0].Close()
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("rank 0's call: %v, want ErrClosed", err)
		}
		peerSees(t, comms[1])
	})
	t.Run("queued", func(t *testing.T) {
		comms := jobPair(t, ctx, "tcp")
		s := comms[0].NewStream("s")
		started := make(chan struct{})
		s.Go(func(ctx context.Context) error { close(started); <-ctx.Done(); return ctx.Err() })
		b0 := []float32{1}
		if err := AllReduceAsync(s, comms[0], b0, b0, Sum); err != nil {
			t.Fatal(err)
		}
		<-started // the AllReduce waits in the queue behind it
		comms[0].Close()
		peerSees(t, comms[1])
	})
}
