package hcomm

import (
	"bytes"
	"context"
	"errors"
	rtrace "runtime/trace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/callpath"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// TestObserver: every collective of every rank reaches the Observer once
// at its start and once at its end, described as it was called.
func TestObserver(t *testing.T) {
	var mu sync.Mutex
	var starts, ends []OpEvent
	obs := &Observer{
		OpStart: func(e OpEvent) { mu.Lock(); starts = append(starts, e); mu.Unlock() },
		OpEnd:   func(e OpEvent) { mu.Lock(); ends = append(ends, e); mu.Unlock() },
	}
	onLocalRanks(t, 2, &Config{Timeout: time.Minute, Algo: "allreduce=ring", Observer: obs}, func(c *Comm) error {
		ctx := context.Background()
		x := make([]float32, 1024)
		if err := AllReduce(ctx, c, x, x, Sum); err != nil {
			return err
		}
		y := make([]int64, 8)
		return Broadcast(ctx, c, y, 1)
	})
	if len(starts) != 4 || len(ends) != 4 {
		t.Fatalf("%d starts and %d ends for 2 collectives on 2 ranks", len(starts), len(ends))
	}
	for _, e := range ends {
		// A ring over 2 ranks sends and receives one message in each of
		// its two phases; the Broadcast's root (1) sends one and waits for
		// nothing, rank 0 receives it.
		want := OpEvent{Comm: "local", Rank: e.Rank, Peers: 2, Seq: 1, Op: "AllReduce", DType: DTypeFloat32, Bytes: 4096, Algo: "ring",
			Chunks: 4, Start: e.Start, Duration: e.Duration, Wait: e.Wait}
		if e.Op == "Broadcast" {
			want.Seq, want.Op, want.DType, want.Bytes, want.Algo, want.Chunks = 2, "Broadcast", DTypeInt64, 64, e.Algo, 1
		}
		if e.Wait > e.Duration || (e.Rank == 0 || e.Op == "AllReduce") && e.Wait <= 0 || e.Rank == 1 && e.Op == "Broadcast" && e.Wait != 0 {
			t.Errorf("%s at rank %d: Wait %v of Duration %v", e.Op, e.Rank, e.Wait, e.Duration)
		}
		if e != want || e.Algo == "" || e.Start.IsZero() || e.Duration <= 0 {
			t.Errorf("OpEnd got %+v, want %+v", e, want)
		}
	}
	for _, e := range starts {
		if e.Duration != 0 || e.Err != nil || e.Algo == "" {
			t.Errorf("OpStart got %+v", e)
		}
	}
}

// TestObserverWaitChunks: Wait is at least how long the peer took to
// arrive, and Chunks counts the pieces the chunk size cuts messages into.
func TestObserverWaitChunks(t *testing.T) {
	const late = 30 * time.Millisecond
	started := make(chan struct{})
	ends := make([]OpEvent, 2)
	obs := &Observer{
		OpStart: func(e OpEvent) {
			if e.Rank == 0 {
				close(started)
			}
		},
		OpEnd: func(e OpEvent) { ends[e.Rank] = e },
	}
	// 8 KiB in 1 KiB chunks: each ring phase's 4 KiB message is 4 chunks.
	onLocalRanks(t, 2, &Config{Timeout: time.Minute, Algo: "allreduce=ring", ChunkBytes: 1024, Observer: obs}, func(c *Comm) error {
		if c.Rank() == 1 {
			<-started
			time.Sleep(late) // rank 0 is in the collective and waits for this one
		}
		x := make([]float32, 2048)
		return AllReduce(context.Background(), c, x, x, Sum)
	})
	for r, e := range ends {
		if e.Chunks != 16 {
			t.Errorf("rank %d: Chunks %d, want 16", r, e.Chunks)
		}
		if e.Wait <= 0 || e.Wait > e.Duration {
			t.Errorf("rank %d: Wait %v of Duration %v", r, e.Wait, e.Duration)
		}
	}
	if ends[0].Wait < late {
		t.Errorf("rank 0 waited %v for a peer that arrived %v late", ends[0].Wait, late)
	}
}

// TestObserverError: a collective that fails reaches OpEnd with its error.
func TestObserverError(t *testing.T) {
	var got atomic.Pointer[OpEvent]
	obs := &Observer{OpEnd: func(e OpEvent) { got.Store(&e) }}
	comms, err := NewLocal(context.Background(), 2, &Config{Timeout: time.Minute, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer comms[1].Close()
	defer comms[0].Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // rank 1 never joins; the call ends with ctx
	x := make([]float64, 4)
	callErr := AllReduce(ctx, comms[0], x, x, Sum)
	e := got.Load()
	if callErr == nil || e == nil || !errors.Is(e.Err, callErr) || e.Op != "AllReduce" {
		t.Fatalf("call error %v, OpEnd %+v", callErr, e)
	}
}

// BenchmarkAllReduceObserved: an Observer that does not allocate keeps a
// collective free of allocations.
func BenchmarkAllReduceObserved(b *testing.B) {
	var n atomic.Int64
	obs := &Observer{OpStart: func(OpEvent) { n.Add(1) }, OpEnd: func(e OpEvent) { n.Add(int64(e.Duration)) }}
	comms, err := NewLocal(context.Background(), benchRanks, &Config{Timeout: time.Minute, Observer: obs})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	bufs := make([][]float32, len(comms))
	for i := range bufs {
		bufs[i] = make([]float32, 2)
	}
	benchCollective(b, comms, 8, func(ctx context.Context, c *Comm) error {
		x := bufs[c.Rank()]
		return AllReduce(ctx, c, x, x, Sum)
	})
	if n.Load() == 0 {
		b.Fatal("the Observer saw nothing")
	}
}

// TestRuntimeTraceRegions: under runtime/trace, collectives are regions
// named after them.
func TestRuntimeTraceRegions(t *testing.T) {
	var buf bytes.Buffer
	if err := rtrace.Start(&buf); err != nil {
		t.Skipf("runtime/trace: %v", err) // another trace is running
	}
	onLocalRanks(t, 2, &Config{Timeout: time.Minute}, func(c *Comm) error {
		x := make([]float64, 4)
		return AllReduce(context.Background(), c, x, x, Sum)
	})
	rtrace.Stop()
	if !bytes.Contains(buf.Bytes(), []byte("hcomm/AllReduce")) {
		t.Error("the execution trace holds no hcomm/AllReduce region")
	}
}

// lateGroup is a transport.Group whose calls take at least late: the
// time the peers' slots took to be filled.
type lateGroup struct{ late time.Duration }

func (g *lateGroup) GroupMax() int { return 1024 }

func (g *lateGroup) GroupRun(d transport.Deferred, fp *wire.Fingerprint, in, out []byte) error {
	time.Sleep(g.late)
	copy(out, in)
	return nil
}

// TestObserverGroupWait: a group call whose peers are late reports the
// wait (not 0) and one chunk.
func TestObserverGroupWait(t *testing.T) {
	const late = 30 * time.Millisecond
	var ends []OpEvent
	comms, err := NewLocal(context.Background(), 2, &Config{Observer: &Observer{OpEnd: func(e OpEvent) { ends = append(ends, e) }}})
	if err != nil {
		t.Fatal(err)
	}
	defer comms[1].Close()
	defer comms[0].Close()
	c := comms[0]
	c.path.InitGroup(struct {
		transport.Transport
		transport.Group
	}{c.path.T, &lateGroup{late}})
	x := make([]float32, 4)
	if err := AllReduce(context.Background(), c, x, x, Sum); err != nil {
		t.Fatal(err)
	}
	if len(ends) != 1 {
		t.Fatalf("%d OpEnd events", len(ends))
	}
	if e := ends[0]; e.Algo != callpath.GroupAlgo || e.Chunks != 1 || e.Wait < late || e.Wait != e.Duration {
		t.Errorf("group call with peers %v late: algo %q, chunks %d, duration %v, wait %v", late, e.Algo, e.Chunks, e.Duration, e.Wait)
	}
}
