package hcomm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/notice"
	"github.com/hcomm-go/hcomm/store"
)

// TestNoticeKeepsMismatch: a rank that learns of a peer's mismatch from
// the store's failure notice, and only then starts its next call, fails
// that call with ErrMismatch, as when the abort reaches it through the
// transport. (The notice arriving first made such a rank report only
// ErrAborted, depending on which of the two came first.)
func TestNoticeKeepsMismatch(t *testing.T) {
	srv, err := store.NewServer(store.ServerConfig{Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	t.Setenv("HCOMM_TRANSPORT", "tcp")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	comms := make([]*Comm, 2)
	ierrs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range comms {
		wg.Go(func() {
			comms[r], ierrs[r] = Init(ctx, &Config{Rank: r, Size: 2, Store: "tcp://" + srv.Addr().String(), Token: "t"})
		})
	}
	wg.Wait()
	for r, err := range ierrs {
		if err != nil {
			t.Fatalf("Init rank %d: %v", r, err)
		}
	}
	defer comms[0].Close()
	defer comms[1].Close()
	// Rank 1 publishes a mismatch as its stall check would, without
	// aborting its transport: rank 0 hears of it from the store only.
	c1 := comms[1]
	why := &OpError{Op: "AllReduce", Rank: 1, Peer: 0, Seq: 1,
		Err: fmt.Errorf("%w: collective 1 on rank 1 called AllReduce(...) while this rank called Broadcast(...)", errs.ErrMismatch)}
	c1.job.PublishFailure(c1.id, c1.members[1], notice.Note{From: 1, Lost: -1, Text: why.Error()})
	c0 := comms[0]
	for c0.path.State.Load() == stateOK { // the notice reaches rank 0
		select {
		case <-ctx.Done():
			t.Fatal("rank 0 never heard of rank 1's failure notice")
		case <-time.After(time.Millisecond): // polls a condition; acts only once it holds
		}
	}
	err = c0.Barrier(ctx)
	if !errors.Is(err, ErrMismatch) || !errors.Is(err, ErrAborted) {
		t.Fatalf("Barrier after a peer's mismatch notice: %v; want ErrMismatch (and ErrAborted)", err)
	}
	var oe *OpError
	if !errors.As(err, &oe) || oe.Peer != 1 {
		t.Errorf("Barrier after a peer's mismatch notice: %v; want an OpError naming peer 1", err)
	}
}
