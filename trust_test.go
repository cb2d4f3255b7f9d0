package hcomm

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// Counts whose sum overflows an int are refused, not wrapped (issue 11
// item 7): a wrapped sum could match a short buffer.
func TestCountsOverflow(t *testing.T) {
	ctx := context.Background()
	comms := newLocal(t, 2, &Config{Timeout: time.Second})
	c := comms[0]
	huge := []int{1, 1 << 61}
	wrap := []int{1, 1<<61 - 1} // 2^61 elements of 8 bytes: 2^64 bytes, 0 when wrapped
	tests := []struct {
		name string
		call func() error
	}{
		{"AllGatherV", func() error { return AllGatherV(ctx, c, []int64{1}, make([]int64, 2), huge) }},
		{"AllGatherV wraps", func() error { return AllGatherV(ctx, c, []int64{1}, nil, wrap) }},
		{"ReduceScatterV wraps", func() error { return ReduceScatterV(ctx, c, nil, []int64{1}, wrap, Sum) }},
		{"AllToAllV send wraps", func() error { return AllToAllV(ctx, c, nil, wrap, []int64{1}, []int{1, 0}) }},
		{"AllToAllV recv wraps", func() error { return AllToAllV(ctx, c, []int64{1}, []int{1, 0}, nil, wrap) }},
	}
	for _, tt := range tests {
		err := tt.call()
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s with counts summing past MaxInt: err = %v, want ErrInvalidArgument", tt.name, err)
		}
	}
}

// Split orders by key with extreme keys too: MinInt sorts first (issue 11
// item 7; a - b overflowed).
func TestSplitExtremeKeys(t *testing.T) {
	ctx := context.Background()
	comms := newLocal(t, 3, nil)
	keys := []int{1, math.MinInt, math.MaxInt}
	want := []int{1, 0, 2}
	subs := make([]*Comm, 3)
	noErrs(t, "Split", par(comms, func(c *Comm) error {
		s, err := c.Split(ctx, 0, keys[c.Rank()])
		subs[c.Rank()] = s
		return err
	}))
	for r, s := range subs {
		if s == nil {
			t.Fatalf("rank %d: no communicator", r)
		}
		defer s.Close()
		if s.Rank() != want[r] {
			t.Errorf("rank %d (key %d): sub rank %d, want %d", r, keys[r], s.Rank(), want[r])
		}
	}
}

// A nil ctx is an argument error that takes no sequence number: the
// communicator stays usable and in step with its peers (issue 11 item 7).
func TestNilContext(t *testing.T) {
	ctx := context.Background()
	comms := newLocal(t, 2, nil)
	x := []int32{1}
	var nilCtx context.Context
	for name, call := range map[string]func() error{
		"AllReduce": func() error { return AllReduce(nilCtx, comms[0], x, x, Sum) },
		"Barrier":   func() error { return comms[0].Barrier(nilCtx) },
		"Send":      func() error { return Send(nilCtx, comms[0], x, 1, 0) },
		"Recv":      func() error { return Recv(nilCtx, comms[0], x, 1, 0) },
	} {
		if err := call(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s(nil ctx) = %v, want ErrInvalidArgument", name, err)
		}
	}
	noErrs(t, "AllReduce after nil ctx", par(comms, func(c *Comm) error {
		y := []int32{1}
		if err := AllReduce(ctx, c, y, y, Sum); err != nil {
			return err
		}
		if y[0] != 2 {
			t.Errorf("rank %d: sum %d, want 2", c.Rank(), y[0])
		}
		return nil
	}))
}

// A call ended by its ctx's deadline says so, even when the
// communicator's own deadline timer notices first; "timed out after" the
// configured timeout appears only when that timeout fired (issue 11 item
// 11).
func TestTimeoutMessageHonest(t *testing.T) {
	comms := newLocal(t, 2, &Config{Timeout: 10 * time.Minute})
	// A ctx with a deadline whose own timer never fires (Done is nil): only
	// the communicator's deadline timer can end the call, as when it beats
	// the ctx's timer to the same deadline.
	ctx := deadlineOnly{context.Background(), time.Now().Add(50 * time.Millisecond)}
	err := AllReduce(ctx, comms[0], make([]int32, 4), make([]int32, 4), Sum)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if strings.Contains(err.Error(), "10m0s") || !strings.Contains(err.Error(), "context deadline") {
		t.Fatalf("ctx deadline reported as %q: want it to name the context's deadline, not the 10m timeout", err)
	}

	comms = newLocal(t, 2, &Config{Timeout: 50 * time.Millisecond})
	ctx2, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	err = AllReduce(ctx2, comms[0], make([]int32, 4), make([]int32, 4), Sum)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "timed out after 50ms") {
		t.Fatalf("configured timeout reported as %v, want \"timed out after 50ms\"", err)
	}
}

type deadlineOnly struct {
	context.Context
	d time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.d, true }

// Split with a negative color gives a nil *Comm whose Close is a no-op, so
// `defer sub.Close()` is safe (issue 11 item 15).
func TestSplitNegativeColorClose(t *testing.T) {
	ctx := context.Background()
	comms := newLocal(t, 2, nil)
	noErrs(t, "Split", par(comms, func(c *Comm) error {
		color := 0
		if c.Rank() == 1 {
			color = -1
		}
		sub, err := c.Split(ctx, color, 0)
		if err != nil {
			return err
		}
		defer sub.Close()
		if c.Rank() == 1 && sub != nil {
			t.Errorf("negative color: got a communicator")
		}
		return nil
	}))
}

// Unclosed lists the communicators not closed, with the line that made
// them, until they are closed (issue 11 item 18).
func TestUnclosed(t *testing.T) {
	before := len(Unclosed())
	comms, err := NewLocal(context.Background(), 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	u := Unclosed()
	if len(u) != before+3 {
		t.Fatalf("Unclosed after NewLocal(3): %d entries, want %d: %q", len(u), before+3, u)
	}
	mine := 0
	for _, s := range u {
		if strings.Contains(s, "trust_test.go:") && strings.Contains(s, "of 3") {
			mine++
		}
	}
	if mine != 3 {
		t.Errorf("Unclosed does not name this test's line for its 3 communicators: %q", u)
	}
	for _, c := range comms {
		c.Close()
	}
	if n := len(Unclosed()); n != before {
		t.Errorf("Unclosed after Close: %d entries, want %d", n, before)
	}
}
