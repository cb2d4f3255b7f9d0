package stream

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
)

// op is a test operation: it records its value when run or skipped.
type op struct{ v int }

func newTest(t *testing.T, name string, ran, skipped *[]int) *Stream[op] {
	t.Helper()
	s := &Stream[op]{}
	s.Start(name, "", time.Minute, Ops[op]{
		Run:  func(_ context.Context, o *op) error { *ran = append(*ran, o.v); return nil },
		Skip: func(_ string, o *op, _ error) { *skipped = append(*skipped, o.v) },
	}, nil)
	t.Cleanup(s.Close)
	return s
}

// Operations run in order; after a failure they are skipped, in order,
// through Skip.
func TestOpsRunThenSkip(t *testing.T) {
	var ran, skipped []int
	s := newTest(t, "s", &ran, &skipped)
	boom := errors.New("boom")
	for i := range 40 { // more than the initial ring
		s.Enqueue(&op{i})
	}
	s.Go(func(context.Context) error { return boom })
	s.Enqueue(&op{100})
	s.Enqueue(&op{101})
	if err := s.Synchronize(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("Synchronize = %v, want boom", err)
	}
	if len(ran) != 40 || ran[39] != 39 || len(skipped) != 2 || skipped[0] != 100 {
		t.Fatalf("ran %v, skipped %v", ran, skipped)
	}
}

// onExit runs once the goroutine of a closed stream has exited, and a
// closed stream refuses operations.
func TestCloseRunsOnExit(t *testing.T) {
	done := make(chan struct{})
	s := &Stream[op]{}
	s.Start("", "p/", 0, Ops[op]{}, func() { close(done) })
	if !strings.HasPrefix(s.Name(), "p/stream#") {
		t.Fatalf("Name = %q", s.Name())
	}
	s.Close()
	<-done
	if s.Enqueue(&op{1}) {
		t.Fatal("Enqueue on a closed stream succeeded")
	}
	if err := s.Err(); !errors.Is(err, errs.ErrClosed) {
		t.Fatalf("Err = %v, want ErrClosed", err)
	}
}

// A wait on an event nobody records times out with the chain described.
func TestWaitTimeoutChain(t *testing.T) {
	var ran, skipped []int
	a := newTest(t, "a", &ran, &skipped)
	a.timeout = time.Millisecond // before anything is enqueued
	var e Event
	e.Init("never")
	a.WaitEvent(&e)
	err := a.Synchronize(context.Background())
	if !errors.Is(err, errs.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), `stream "a" waits for event "never", which has not been recorded`) {
		t.Fatalf("err = %v", err)
	}
}

func TestCtxErr(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), -1)
	defer cancel()
	if err := CtxErr(ctx); !errors.Is(err, errs.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CtxErr(expired) = %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if err := CtxErr(ctx); err != context.Canceled {
		t.Fatalf("CtxErr(cancelled) = %v", err)
	}
}
