package hcomm

import (
	"context"
	"errors"
	"fmt"
	"github.com/hcomm-go/hcomm/internal/allocs"
	"github.com/hcomm-go/hcomm/internal/clock"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newTestStream returns a stream closed when the test ends.
func newTestStream(t testing.TB, name string, timeout time.Duration) *Stream {
	t.Helper()
	s := NewStream(name, &StreamConfig{Timeout: timeout})
	t.Cleanup(func() { s.Close() })
	return s
}

func syncOK(t testing.TB, s *Stream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Synchronize(ctx); err != nil {
		t.Fatalf("Synchronize %s: %v", s, err)
	}
}

func TestStreamRunsInOrder(t *testing.T) {
	s := newTestStream(t, "s", time.Minute)
	var got []int
	for i := range 200 { // more than the initial ring, so it grows
		s.Go(func(context.Context) error { got = append(got, i); return nil })
	}
	syncOK(t, s)
	want := make([]int, 200)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ran %v, want 0..199 in order", got)
	}
	if !s.Query() {
		t.Fatal("Query after Synchronize = false")
	}
}

// Work enqueued after WaitEvent never starts before the event's record
// completes, and the caller of WaitEvent is not blocked.
func TestWaitEventOrdering(t *testing.T) {
	for _, tc := range []struct {
		name        string
		recordFirst bool // record before the wait is issued, or after (a wait for the first record)
	}{{"recorded", true}, {"first-record", false}} {
		t.Run(tc.name, func(t *testing.T) {
			producer := newTestStream(t, "producer", time.Minute)
			consumer := newTestStream(t, "consumer", time.Minute)
			gate := make(chan struct{})
			var produced, consumedEarly atomic.Bool
			producer.Go(func(context.Context) error { <-gate; produced.Store(true); return nil })
			e := NewEvent("ready")
			defer e.Release()
			if tc.recordFirst {
				producer.RecordEvent(e)
			}
			start := time.Now()
			consumer.WaitEvent(e)
			if d := time.Since(start); d > time.Second {
				t.Fatalf("WaitEvent blocked the caller for %v", d)
			}
			ran := make(chan struct{})
			consumer.Go(func(context.Context) error {
				if !produced.Load() {
					consumedEarly.Store(true)
				}
				close(ran)
				return nil
			})
			if !tc.recordFirst {
				producer.RecordEvent(e)
			}
			select {
			case <-ran:
				t.Fatal("work after WaitEvent ran before the event's record completed")
			case <-time.After(50 * time.Millisecond):
			}
			if e.Query() {
				t.Fatal("Query = true before the record completed")
			}
			close(gate)
			syncOK(t, consumer)
			if consumedEarly.Load() {
				t.Fatal("consumer saw the producer's work unfinished")
			}
			if !e.Query() {
				t.Fatal("Query = false after the consumer passed the wait")
			}
		})
	}
}

func TestStreamStickyError(t *testing.T) {
	boom := errors.New("boom")
	s := newTestStream(t, "compute", time.Minute)
	other := newTestStream(t, "other", time.Minute)
	var after atomic.Bool
	s.Go(func(context.Context) error { return boom })
	s.Go(func(context.Context) error { after.Store(true); return nil })
	e := s.Record()
	defer e.Release()
	other.WaitEvent(e)
	var otherRan atomic.Bool
	other.Go(func(context.Context) error { otherRan.Store(true); return nil })

	ctx := context.Background()
	if err := s.Synchronize(ctx); !errors.Is(err, boom) {
		t.Fatalf("Synchronize = %v, want boom", err)
	}
	if err := s.Synchronize(ctx); !errors.Is(err, boom) {
		t.Fatalf("second Synchronize = %v, want boom again (sticky)", err)
	}
	if after.Load() {
		t.Fatal("work after the failure ran")
	}
	if err := e.Synchronize(ctx); !errors.Is(err, boom) {
		t.Fatalf("event recorded after the failure: %v, want boom", err)
	}
	err := other.Synchronize(ctx)
	var se *StreamError
	if !errors.Is(err, boom) || !errors.As(err, &se) || se.Stream != "other" || se.Op != "WaitEvent" {
		t.Fatalf("waiting stream: %v, want a WaitEvent StreamError on \"other\" wrapping boom", err)
	}
	if otherRan.Load() {
		t.Fatal("work after a failed wait ran")
	}
}

func TestStreamPanicBecomesError(t *testing.T) {
	s := newTestStream(t, "p", time.Minute)
	s.Go(func(context.Context) error { panic("kaput") })
	err := s.Synchronize(context.Background())
	if err == nil || !strings.Contains(err.Error(), "panic: kaput") {
		t.Fatalf("Synchronize = %v, want the panic as an error", err)
	}
}

func TestStreamCancellation(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*Stream)
		want error
	}{
		{"Abort", func(s *Stream) { s.Abort(errors.New("stop")) }, ErrAborted},
		{"Close", func(s *Stream) { s.Close() }, ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStream("c", nil)
			defer s.Close()
			started := make(chan struct{})
			var ctxErr error
			s.Go(func(ctx context.Context) error {
				close(started)
				<-ctx.Done()
				ctxErr = ctx.Err()
				return ctx.Err()
			})
			var skipped atomic.Bool
			s.Go(func(context.Context) error { skipped.Store(true); return nil })
			e := s.Record()
			<-started
			tc.stop(s)
			if err := e.Synchronize(context.Background()); !errors.Is(err, tc.want) {
				t.Fatalf("event after %s: %v, want %v", tc.name, err, tc.want)
			}
			if !errors.Is(ctxErr, context.Canceled) {
				t.Fatalf("running work saw ctx.Err() = %v, want Canceled", ctxErr)
			}
			if skipped.Load() {
				t.Fatal("work not yet started ran after " + tc.name)
			}
			if tc.name == "Close" {
				late := s.Record() // refused: completes at once
				if err := late.Synchronize(context.Background()); !errors.Is(err, ErrClosed) {
					t.Fatalf("record on a closed stream: %v, want ErrClosed", err)
				}
			} else if err := s.Synchronize(context.Background()); !errors.Is(err, ErrAborted) {
				t.Fatalf("Synchronize after Abort = %v", err)
			}
		})
	}
}

func TestSynchronizeContext(t *testing.T) {
	s := newTestStream(t, "slow", time.Minute)
	gate := make(chan struct{})
	s.Go(func(context.Context) error { <-gate; return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := s.Synchronize(ctx)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Synchronize past its deadline = %v, want ErrTimeout", err)
	}
	close(gate)
	syncOK(t, s) // the work was not disturbed
}

// Recording an event again re-arms it: a wait refers to the record that is
// the latest when the wait is issued.
func TestEventReuse(t *testing.T) {
	ctx := context.Background()
	t.Run("wait issued before the re-record", func(t *testing.T) {
		p := newTestStream(t, "p", time.Minute)
		c := newTestStream(t, "c", time.Minute)
		e := NewEvent("e")
		defer e.Release()
		p.RecordEvent(e) // record 1: completes at once
		c.WaitEvent(e)   // refers to record 1
		gate := make(chan struct{})
		p.Go(func(context.Context) error { <-gate; return nil })
		p.RecordEvent(e) // record 2, blocked behind the gate
		done := make(chan struct{})
		c.Go(func(context.Context) error { close(done); return nil })
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("a wait issued before the re-record waited for the new record")
		}
		if e.Query() {
			t.Fatal("Query = true while the latest record is pending")
		}
		close(gate)
		if err := e.Synchronize(ctx); err != nil || !e.Query() {
			t.Fatalf("Synchronize = %v, Query = %v", err, e.Query())
		}
	})
	t.Run("wait issued after the re-record", func(t *testing.T) {
		// The hazard: the consumer meant record 1, but the producer
		// re-recorded first, so the consumer waits for record 2.
		p := newTestStream(t, "p", time.Minute)
		c := newTestStream(t, "c", time.Minute)
		e := NewEvent("e")
		defer e.Release()
		p.RecordEvent(e)
		gate := make(chan struct{})
		p.Go(func(context.Context) error { <-gate; return nil })
		p.RecordEvent(e)
		c.WaitEvent(e)
		done := make(chan struct{})
		c.Go(func(context.Context) error { close(done); return nil })
		select {
		case <-done:
			t.Fatal("a wait issued after the re-record did not wait for it")
		case <-time.After(50 * time.Millisecond):
		}
		close(gate)
		<-done
	})
	t.Run("stale event from an earlier iteration", func(t *testing.T) {
		p := newTestStream(t, "p", time.Minute)
		e := NewEvent("step")
		defer e.Release()
		p.RecordEvent(e)
		syncOK(t, p)
		// Next iteration: work is enqueued, but the event is not recorded
		// again yet. Without Reset the event still refers to the last
		// iteration and reports complete.
		gate := make(chan struct{})
		defer close(gate)
		p.Go(func(context.Context) error { <-gate; return nil })
		if !e.Query() {
			t.Fatal("stale event should still report the old record as complete")
		}
		e.Reset()
		if e.Query() {
			t.Fatal("Query after Reset = true")
		}
		c := newTestStream(t, "c", time.Minute)
		c.WaitEvent(e) // waits for the next record
		done := make(chan struct{})
		c.Go(func(context.Context) error { close(done); return nil })
		select {
		case <-done:
			t.Fatal("wait after Reset did not wait for the next record")
		case <-time.After(30 * time.Millisecond):
		}
		p.RecordEvent(e)
		gate <- struct{}{}
		<-done
	})
	t.Run("recorded on two streams", func(t *testing.T) {
		a := newTestStream(t, "a", time.Minute)
		b := newTestStream(t, "b", time.Minute)
		e := NewEvent("e")
		defer e.Release()
		gate := make(chan struct{})
		a.Go(func(context.Context) error { <-gate; return nil })
		a.RecordEvent(e) // record 1, pending
		b.RecordEvent(e) // record 2, completes at once
		if err := e.Synchronize(ctx); err != nil {
			t.Fatal(err)
		}
		if !e.Query() {
			t.Fatal("the latest record completed but Query = false")
		}
		close(gate)
		syncOK(t, a)
	})
}

func TestEventElapsed(t *testing.T) {
	s := newTestStream(t, "timer", time.Minute)
	clk := clock.NewFake()
	s.s.SetClock(clk) // before the first record: the stream reads it only on its goroutine, after enqueueing
	start := s.Record()
	s.Go(func(context.Context) error { clk.Advance(30 * time.Millisecond); return nil })
	end := s.Record()
	if _, err := start.Elapsed(NewEvent("never")); !errors.Is(err, ErrNotRecorded) {
		t.Fatalf("Elapsed to an unrecorded event: %v, want ErrNotRecorded", err)
	}
	syncOK(t, s)
	d, err := start.Elapsed(end)
	if err != nil || d < 30*time.Millisecond || d > 5*time.Second {
		t.Fatalf("Elapsed = %v, %v; want about 30ms", d, err)
	}
	start.Release()
	end.Release()
}

// A dependency cycle is reported on timeout with the chain of waits.
func TestDependencyCycle(t *testing.T) {
	s1 := newTestStream(t, "s1", 150*time.Millisecond)
	s2 := newTestStream(t, "s2", 10*time.Second)
	e1, e2 := NewEvent("e1"), NewEvent("e2")
	defer e1.Release()
	defer e2.Release()
	s1.WaitEvent(e2) // never recorded yet: waits for its first record
	s1.RecordEvent(e1)
	s2.WaitEvent(e1)
	s2.RecordEvent(e2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s1.Synchronize(ctx)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("s1: %v, want ErrTimeout", err)
	}
	want := `stream "s1": WaitEvent: timed out after 150ms: stream "s1" waits for event "e2" recorded on stream "s2", which waits for event "e1" recorded on stream "s1": dependency cycle`
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("s1 error:\n%v\nwant it to contain\n%s", err, want)
	}
	// s1's failure completes e1 with its error, which frees s2 with it.
	if err := s2.Synchronize(ctx); !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), `event "e1" failed`) {
		t.Fatalf("s2: %v, want the failure of e1", err)
	}
}

func TestWaitNeverRecorded(t *testing.T) {
	s := newTestStream(t, "lonely", 50*time.Millisecond)
	e := NewEvent("ghost")
	defer e.Release()
	s.WaitEvent(e)
	err := s.Synchronize(context.Background())
	want := `stream "lonely" waits for event "ghost", which has not been recorded since the wait was issued`
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want ErrTimeout mentioning %q", err, want)
	}
}

func TestStreamCtxAsParent(t *testing.T) {
	s := NewStream("parent", nil)
	defer s.Close()
	derived := make(chan context.Context, 1)
	gate := make(chan struct{})
	s.Go(func(ctx context.Context) error {
		child, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		derived <- child
		<-child.Done() // cancelled through the stream's AfterFunc
		<-gate
		return nil
	})
	child := <-derived
	s.Abort(nil)
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a context derived from the stream's was not cancelled by Abort")
	}
	close(gate)
}

// Go, RecordEvent of a reused event, WaitEvent and Synchronize allocate
// nothing once the ring is warm. (NewStream, NewEvent and Record allocate:
// handles are not pooled, see TestStreamHandleNoAlias.)
func TestStreamAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	s1 := newTestStream(t, "a", time.Minute)
	s2 := newTestStream(t, "b", time.Minute)
	ctx := context.Background()
	var n int
	fn := func(context.Context) error { n++; return nil }
	e := NewEvent("e")
	step := func() {
		s1.Go(fn)
		s1.RecordEvent(e)
		s2.WaitEvent(e)
		s2.Go(fn)
		if err := s2.Synchronize(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		step()
	}
	if a := allocs.PerRun(200, 0, step); a != 0 {
		t.Errorf("Go+RecordEvent+WaitEvent+Synchronize: %v allocations per step, want 0", a)
	}
}

// A closed stream or released event is never another's: a.Close(); b :=
// NewStream() gives a != b, a second a.Close() leaves b open, work on a
// after Close never runs (on b or anywhere) and a reports ErrClosed.
func TestStreamHandleNoAlias(t *testing.T) {
	ctx := context.Background()
	for range 50 {
		a := NewStream("A", nil)
		if err := a.Synchronize(ctx); err != nil {
			t.Fatal(err)
		}
		a.Close()
		b := NewStream("B", nil)
		if a == b {
			t.Fatal("NewStream after Close returned the closed stream's handle")
		}
		a.Close() // idempotent; must not close b
		ran := make(chan string, 2)
		a.Go(func(context.Context) error { ran <- "a"; return nil })
		b.Go(func(context.Context) error { ran <- "b"; return nil })
		if err := b.Synchronize(ctx); err != nil {
			t.Fatalf("b after a second a.Close(): %v", err)
		}
		if err := a.Err(); !errors.Is(err, ErrClosed) {
			t.Fatalf("a.Err() after Close = %v, want ErrClosed", err)
		}
		if err := a.Synchronize(ctx); !errors.Is(err, ErrClosed) {
			t.Fatalf("a.Synchronize() after Close = %v, want ErrClosed", err)
		}
		if got := <-ran; got != "b" || len(ran) != 0 {
			t.Fatalf("work enqueued on a closed stream ran (%q)", got)
		}
		b.Close()

		e := NewEvent("e")
		e.Release()
		f := NewEvent("f")
		if e == f {
			t.Fatal("NewEvent after Release returned the released event's handle")
		}
		s := NewStream("S", nil)
		s.RecordEvent(e)
		if err := e.Synchronize(ctx); !errors.Is(err, ErrClosed) {
			t.Fatalf("record of a released event: %v, want ErrClosed", err)
		}
		s.RecordEvent(f)
		if err := f.Synchronize(ctx); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}

// onLocalRanks runs body on every rank of an n-rank local job.
func onLocalRanks(t testing.TB, n int, cfg *Config, body func(c *Comm) error) {
	t.Helper()
	ctx := context.Background()
	comms, err := NewLocal(ctx, n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			errs[c.Rank()] = body(c)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// Every asynchronous collective gives the same result as its synchronous
// form.
func TestAsyncCollectives(t *testing.T) {
	const n, k = 3, 5
	ctx := context.Background()
	onLocalRanks(t, n, &Config{Timeout: time.Minute}, func(c *Comm) error {
		r := c.Rank()
		s := c.NewStream("")
		defer s.Close()
		seq := func(m, scale int) []int64 {
			v := make([]int64, m)
			for i := range v {
				v[i] = int64(scale*(r+1)*1000 + i)
			}
			return v
		}
		type pair struct {
			name       string
			async      func() []int64
			sync       func() ([]int64, error)
			rootedOnly bool
		}
		counts := []int{2, 0, 3}
		tot := 5
		a2aCounts := []int{1, 2, 3}
		pairs := []pair{
			{"AllReduce", func() []int64 { o := make([]int64, k); AllReduceAsync(s, c, seq(k, 1), o, Sum); return o },
				func() ([]int64, error) { o := make([]int64, k); return o, AllReduce(ctx, c, seq(k, 1), o, Sum) }, false},
			{"Reduce", func() []int64 { o := make([]int64, k); ReduceAsync(s, c, seq(k, 1), o, Max, 1); return o },
				func() ([]int64, error) { o := make([]int64, k); return o, Reduce(ctx, c, seq(k, 1), o, Max, 1) }, true},
			{"Broadcast", func() []int64 { o := seq(k, 2); BroadcastAsync(s, c, o, 2); return o },
				func() ([]int64, error) { o := seq(k, 2); return o, Broadcast(ctx, c, o, 2) }, false},
			{"AllGather", func() []int64 { o := make([]int64, n*k); AllGatherAsync(s, c, seq(k, 1), o); return o },
				func() ([]int64, error) { o := make([]int64, n*k); return o, AllGather(ctx, c, seq(k, 1), o) }, false},
			{"AllGatherV", func() []int64 { o := make([]int64, tot); AllGatherVAsync(s, c, seq(counts[r], 1), o, counts); return o },
				func() ([]int64, error) {
					o := make([]int64, tot)
					return o, AllGatherV(ctx, c, seq(counts[r], 1), o, counts)
				}, false},
			{"ReduceScatter", func() []int64 { o := make([]int64, k); ReduceScatterAsync(s, c, seq(n*k, 1), o, Sum); return o },
				func() ([]int64, error) { o := make([]int64, k); return o, ReduceScatter(ctx, c, seq(n*k, 1), o, Sum) }, false},
			{"ReduceScatterV", func() []int64 {
				o := make([]int64, counts[r])
				ReduceScatterVAsync(s, c, seq(tot, 1), o, counts, Sum)
				return o
			}, func() ([]int64, error) {
				o := make([]int64, counts[r])
				return o, ReduceScatterV(ctx, c, seq(tot, 1), o, counts, Sum)
			}, false},
			{"AllToAll", func() []int64 { o := make([]int64, n*k); AllToAllAsync(s, c, seq(n*k, 1), o); return o },
				func() ([]int64, error) { o := make([]int64, n*k); return o, AllToAll(ctx, c, seq(n*k, 1), o) }, false},
			{"AllToAllV", func() []int64 {
				// Rank r sends a2aCounts[r] elements to everyone.
				sc := []int{a2aCounts[r], a2aCounts[r], a2aCounts[r]}
				o := make([]int64, 6)
				AllToAllVAsync(s, c, seq(3*a2aCounts[r], 1), sc, o, a2aCounts)
				return o
			}, func() ([]int64, error) {
				sc := []int{a2aCounts[r], a2aCounts[r], a2aCounts[r]}
				o := make([]int64, 6)
				return o, AllToAllV(ctx, c, seq(3*a2aCounts[r], 1), sc, o, a2aCounts)
			}, false},
			{"Gather", func() []int64 { o := make([]int64, n*k); GatherAsync(s, c, seq(k, 1), o, 0); return o },
				func() ([]int64, error) { o := make([]int64, n*k); return o, Gather(ctx, c, seq(k, 1), o, 0) }, true},
			{"Scatter", func() []int64 { o := make([]int64, k); ScatterAsync(s, c, seq(n*k, 1), o, 1); return o },
				func() ([]int64, error) { o := make([]int64, k); return o, Scatter(ctx, c, seq(n*k, 1), o, 1) }, false},
		}
		for _, p := range pairs {
			got := p.async()
			BarrierAsync(s, c)
			if err := s.Synchronize(ctx); err != nil {
				return fmt.Errorf("%sAsync: %w", p.name, err)
			}
			want, err := p.sync()
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("rank %d %sAsync = %v, want %v", r, p.name, got, want)
			}
		}
		// Send and Recv around a ring, a stream per direction.
		rs := c.NewStream("")
		defer rs.Close()
		out := seq(k, 7)
		in := make([]int64, k)
		SendAsync(s, c, out, (r+1)%n, 9)
		RecvAsync(rs, c, in, (r+n-1)%n, 9)
		if err := errors.Join(s.Synchronize(ctx), rs.Synchronize(ctx)); err != nil {
			return err
		}
		for i, v := range in {
			if want := int64(7*((r+n-1)%n+1)*1000 + i); v != want {
				return fmt.Errorf("rank %d Recv[%d] = %d, want %d", r, i, v, want)
			}
		}
		return nil
	})
}

// A collective's argument error is returned by the Async call itself:
// nothing is enqueued, the stream and the communicator stay usable, and the
// ranks go on with their next collective (issue 11 item 17).
func TestAsyncArgumentError(t *testing.T) {
	ctx := context.Background()
	onLocalRanks(t, 2, &Config{Timeout: time.Minute}, func(c *Comm) error {
		s := c.NewStream("")
		defer s.Close()
		err := AllReduceAsync(s, c, make([]float32, 3), make([]float32, 4), Sum)
		var oe *OpError
		if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &oe) || oe.Op != "AllReduce" {
			return fmt.Errorf("AllReduceAsync returned %v, want an AllReduce argument error", err)
		}
		for _, err := range []error{
			AllGatherVAsync(s, c, []int32{1}, make([]int32, 2), []int{1, 1 << 61}),
			SendAsync(s, c, []int32{1}, c.Rank(), 0),
			RecvAsync(s, c, []int32{1}, 5, 0),
			BroadcastAsync(s, c, []int32{1}, -1),
			AllReduceAsync(s, nil, []float32{1}, []float32{1}, Sum),
		} {
			if !errors.Is(err, ErrInvalidArgument) {
				return fmt.Errorf("Async argument error returned %v, want ErrInvalidArgument", err)
			}
		}
		if err := s.Synchronize(ctx); err != nil {
			return fmt.Errorf("stream failed by an argument error: %v", err)
		}
		x := []float32{float32(c.Rank() + 1)}
		if err := AllReduceAsync(s, c, x, x, Sum); err != nil {
			return err
		}
		if err := s.Synchronize(ctx); err != nil {
			return fmt.Errorf("communicator unusable after an Async argument error: %v", err)
		}
		if x[0] != 3 {
			return fmt.Errorf("AllReduce after the argument error gave %v, want 3", x[0])
		}
		return nil
	})
}

// A collective skipped because its stream failed aborts the communicator,
// so the peer fails at once instead of waiting out its timeout.
func TestSkippedCollectiveAbortsComm(t *testing.T) {
	boom := errors.New("boom")
	ctx := context.Background()
	onLocalRanks(t, 2, &Config{Timeout: time.Minute}, func(c *Comm) error {
		s := c.NewStream("")
		defer s.Close()
		if c.Rank() == 0 {
			s.Go(func(context.Context) error { return boom })
		}
		x := []float64{1}
		AllReduceAsync(s, c, x, x, Sum)
		start := time.Now()
		err := s.Synchronize(ctx)
		if c.Rank() == 0 && !errors.Is(err, boom) {
			return fmt.Errorf("rank 0: %v, want boom", err)
		}
		if c.Rank() == 1 && !errors.Is(err, ErrAborted) && !errors.Is(err, ErrPeerLost) {
			return fmt.Errorf("rank 1: %v, want the peer's abort", err)
		}
		if d := time.Since(start); d > 20*time.Second {
			return fmt.Errorf("rank %d took %v to fail", c.Rank(), d)
		}
		return nil
	})
}

// TestNewStreamAfterClose: a stream made by a closed communicator is
// closed already (the communicator's Close cannot close it any more): its
// calls fail with ErrClosed and it leaves no goroutine behind.
func TestNewStreamAfterClose(t *testing.T) {
	comms, err := NewLocal(context.Background(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	comms[0].Close()
	before := runtime.NumGoroutine()
	s := comms[0].NewStream("late")
	if err := s.Synchronize(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Synchronize on a stream of a closed communicator: %v, want ErrClosed", err)
	}
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stream's goroutine still runs (%d goroutines, %d before)", runtime.NumGoroutine(), before)
		}
	}
}

// TestNewStreamWhileClosing: NewStream racing with the communicator's
// Close (the race detector's business) gives a stream that Close closed
// or that is closed already, never one Close touched before it was set up.
func TestNewStreamWhileClosing(t *testing.T) {
	for range 20 {
		comms, err := NewLocal(context.Background(), 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		made := make(chan *Stream, 1)
		go func() { made <- comms[0].NewStream("racing") }()
		comms[0].Close()
		s := <-made
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// Closed by Close or at once: Synchronize fails with ErrClosed,
		// or succeeds if the stream was made and drained before Close.
		if err := s.Synchronize(ctx); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Synchronize: %v", err)
		}
		cancel()
		s.Close()
	}
}
