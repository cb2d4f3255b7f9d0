package hcomm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/allocs"
	"github.com/hcomm-go/hcomm/internal/traceevent"
)

// TestObserverStream: a communicator's streams report their records,
// waits and work, in the order they ran them, with the events' names;
// the trace file puts them on one thread per stream.
func TestObserverStream(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]string{} // "rank/stream" → what it did
	obs := &Observer{Stream: func(e StreamEvent) {
		mu.Lock()
		defer mu.Unlock()
		if e.Comm != "local" || e.Start.IsZero() || e.Duration < 0 || (e.Kind == "record" && e.Duration != 0) {
			t.Errorf("event %+v", e)
		}
		k := fmt.Sprintf("%d/%s", e.Rank, e.Stream)
		got[k] = append(got[k], strings.TrimSpace(e.Kind+" "+e.Event))
	}}
	onLocalRanks(t, 2, &Config{Timeout: time.Minute, Observer: obs}, func(c *Comm) error {
		ctx := context.Background()
		compute, comm := c.NewStream("compute"), c.NewStream("comm")
		x := make([]float32, 16)
		compute.Go(func(context.Context) error { x[0] = 1; return nil })
		grads := NewEvent("grads")
		compute.RecordEvent(grads)
		comm.WaitEvent(grads)
		if err := AllReduceAsync(comm, c, x, x, Sum); err != nil {
			return err
		}
		done := comm.Record()
		if err := done.Synchronize(ctx); err != nil {
			return err
		}
		if x[0] != 2 {
			return fmt.Errorf("rank %d: AllReduce on the stream gave %v", c.Rank(), x[0])
		}
		return nil
	})
	for r := range 2 {
		if c := strings.Join(got[fmt.Sprintf("%d/compute", r)], ", "); c != "Go, record grads" {
			t.Errorf("rank %d's compute stream: %s", r, c)
		}
		cm := got[fmt.Sprintf("%d/comm", r)]
		if len(cm) != 3 || cm[0] != "wait grads" || cm[1] != "AllReduce" || !strings.HasPrefix(cm[2], "record event#") {
			t.Errorf("rank %d's comm stream: %q", r, cm)
		}
	}
}

// TestTraceFileStreams: stream events become a thread per stream in the
// trace file, records as instants and waits and work as slices.
func TestTraceFileStreams(t *testing.T) {
	name := filepath.Join(t.TempDir(), "s.json")
	tf, err := openTrace(name, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := tf.observer()
	at := time.Unix(100, 0)
	o.Stream(StreamEvent{Comm: "world", Stream: "comm", Kind: "wait", Event: "grads", Start: at, Duration: time.Millisecond})
	o.Stream(StreamEvent{Comm: "world", Stream: "comm", Kind: "AllReduce", Start: at.Add(time.Millisecond), Duration: time.Millisecond})
	o.Stream(StreamEvent{Comm: "world", Stream: "compute", Kind: "record", Event: "grads", Start: at})
	if err := tf.close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(traceFileName(name, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := traceevent.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	threads := map[int]string{}
	var saw []string
	for _, e := range evs {
		if e.Ph == "M" && e.Name == "thread_name" {
			threads[e.TID], _ = e.Args["name"].(string)
			continue
		}
		if e.Cat == "stream" {
			saw = append(saw, fmt.Sprintf("%s:%s:%s", threads[e.TID], e.Ph, e.Name))
		}
	}
	want := "stream comm:X:wait grads, stream comm:X:AllReduce, stream compute:i:record grads"
	if strings.Join(saw, ", ") != want {
		t.Errorf("stream events %q, want %q", strings.Join(saw, ", "), want)
	}
}

// TestObserverStreamAllocs: watching the streams of a communicator
// allocates nothing per record or wait, of a named or an unnamed event.
func TestObserverStreamAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	var names atomic.Int64 // bytes of event names seen (the streams' goroutines)
	obs := &Observer{Stream: func(e StreamEvent) { names.Add(int64(len(e.Event))) }}
	comms, err := NewLocal(context.Background(), 1, &Config{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer comms[0].Close()
	s1, s2 := comms[0].NewStream("a"), comms[0].NewStream("b")
	defer s1.Close()
	defer s2.Close()
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	for _, name := range []string{"named", ""} {
		e := NewEvent(name)
		step := func() {
			s1.Go(fn)
			s1.RecordEvent(e)
			s2.WaitEvent(e)
			s2.Go(fn)
			if err := s1.Synchronize(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s2.Synchronize(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for range 100 {
			step()
		}
		if a := allocs.PerRun(200, 0, step); a != 0 {
			t.Errorf("event %q: Go+RecordEvent+WaitEvent+Synchronize on observed streams: %v allocations per step, want 0", name, a)
		}
		if names.Load() == 0 {
			t.Fatal("the observer saw no event names")
		}
	}
}
