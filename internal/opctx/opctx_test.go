package opctx

import (
	"context"
	"errors"
	"github.com/hcomm-go/hcomm/internal/clock"
	"testing"
	"time"
)

func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

func TestDeadline(t *testing.T) {
	clk := clock.NewFake()
	o := &Ctx{Clock: clk}
	o.Begin(context.Background(), clk.Now(), 10*time.Second)
	if d, ok := o.Deadline(); !ok || !d.Equal(clk.Now().Add(10*time.Second)) {
		t.Errorf("Deadline = %v, %v", d, ok)
	}
	hooked := make(chan struct{})
	stop := context.AfterFunc(o, func() { close(hooked) })
	defer stop()
	clk.Advance(9 * time.Second)
	if isDone(o) || o.Err() != nil {
		t.Fatal("ended before its deadline")
	}
	clk.Advance(time.Second)
	if !isDone(o) || !errors.Is(o.Err(), context.DeadlineExceeded) {
		t.Fatalf("at the deadline: Err = %v", o.Err())
	}
	<-hooked // context.AfterFunc's function ran
	o.End()

	// Reused for the next call: a fresh, open context.
	o.Begin(context.Background(), clk.Now(), time.Minute)
	if isDone(o) || o.Err() != nil {
		t.Fatalf("reused context starts ended: %v", o.Err())
	}
	o.End()
}

// TestLazyTimer checks that calls shorter than the timeout touch no timer,
// and that a timer armed for an earlier call's deadline re-arms itself for
// the current call's.
func TestLazyTimer(t *testing.T) {
	clk := clock.NewFake()
	o := &Ctx{Clock: clk}
	for range 5 {
		o.Begin(context.Background(), clk.Now(), 10*time.Second)
		o.End()
		clk.Advance(time.Second)
	}
	if made, _ := clk.Timers(); made != 1 {
		t.Fatalf("%d timers made, want 1", made)
	}
	// The timer fires at the first call's deadline (t0+10s) with no call
	// running and disarms; the next call arms it again.
	clk.Advance(10 * time.Second)
	if _, armed := clk.Timers(); armed != 0 {
		t.Fatal("timer still armed between calls")
	}
	start := clk.Now()
	o.Begin(context.Background(), start, 10*time.Second)
	clk.Advance(5 * time.Second)
	o.End()
	o.Begin(context.Background(), clk.Now(), 10*time.Second) // deadline start+15s
	clk.Advance(5 * time.Second)                             // the timer fires at start+10s and re-arms
	if isDone(o) {
		t.Fatal("ended at an earlier call's deadline")
	}
	clk.Advance(5 * time.Second)
	if !errors.Is(o.Err(), context.DeadlineExceeded) {
		t.Fatalf("at its own deadline: Err = %v", o.Err())
	}
	o.End()
}

func TestParent(t *testing.T) {
	clk := clock.NewFake()
	o := &Ctx{Clock: clk}

	// A parent that ends first ends the call with its error.
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	o.Begin(parent, clk.Now(), time.Hour)
	if o.Value(key{}) != "v" {
		t.Error("Value does not reach the parent")
	}
	cancel()
	<-o.Done()
	if !errors.Is(o.Err(), context.Canceled) {
		t.Errorf("Err = %v, want Canceled", o.Err())
	}
	o.End()
	if o.Value(key{}) != nil {
		t.Error("Value after End reaches the old parent")
	}

	// A parent with an earlier deadline sets the call's deadline.
	pd := clk.Now().Add(time.Second)
	p2, cancel2 := context.WithDeadline(context.Background(), pd)
	defer cancel2()
	o.Begin(p2, clk.Now(), time.Hour)
	if d, _ := o.Deadline(); !d.Equal(pd) {
		t.Errorf("Deadline = %v, want the parent's %v", d, pd)
	}
	o.End()

	// A parent that has already ended ends the call at once.
	o.Begin(parent, clk.Now(), time.Hour)
	if !errors.Is(o.Err(), context.Canceled) {
		t.Errorf("Begin under an ended parent: Err = %v", o.Err())
	}
	o.End()

	// Ending a call stops the parent's cancellation from reaching later ones.
	p3, cancel3 := context.WithCancel(context.Background())
	o.Begin(p3, clk.Now(), time.Hour)
	o.End()
	o.Begin(context.Background(), clk.Now(), time.Hour)
	cancel3()
	if o.Err() != nil {
		t.Errorf("a previous call's parent ended this call: %v", o.Err())
	}
	o.End()
}

func TestAfterFuncStop(t *testing.T) {
	clk := clock.NewFake()
	o := &Ctx{Clock: clk}
	o.Begin(context.Background(), clk.Now(), time.Second)
	ran := false
	stop := o.AfterFunc(func() { ran = true })
	if !stop() {
		t.Error("stop of a pending hook reported false")
	}
	clk.Advance(time.Second)
	if ran {
		t.Error("a stopped hook ran")
	}
	// On an ended context the hook runs at once (on its own goroutine).
	done := make(chan struct{})
	if o.AfterFunc(func() { close(done) })() {
		t.Error("stop after the end reported true")
	}
	<-done
	o.End()
}

type key struct{}

// TestStop: Stop disarms the timer, and calls begun after it arm none (a
// closed communicator's timer would hold it until the deadline); their
// parent still ends them.
func TestStop(t *testing.T) {
	clk := clock.NewFake()
	o := &Ctx{Clock: clk}
	o.Begin(context.Background(), clk.Now(), time.Hour)
	o.End()
	if _, armed := clk.Timers(); armed != 1 {
		t.Fatalf("%d timers armed after a call, want 1", armed)
	}
	o.Stop()
	if _, armed := clk.Timers(); armed != 0 {
		t.Fatalf("%d timers armed after Stop", armed)
	}
	parent, cancel := context.WithCancel(context.Background())
	o.Begin(parent, clk.Now(), time.Hour)
	if _, armed := clk.Timers(); armed != 0 {
		t.Fatalf("a call after Stop armed %d timers", armed)
	}
	cancel()
	select {
	case <-o.Done():
	case <-time.After(time.Minute):
		t.Fatal("cancelling the parent did not end the call")
	}
	o.End()
}
