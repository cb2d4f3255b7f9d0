package hcomm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/allocs"
	"github.com/hcomm-go/hcomm/internal/argcheck"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/trace"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// nopGroup is a transport.Group that completes every call at once, so that
// what remains is the root package's own per-call path.
type nopGroup struct{ calls int }

func (g *nopGroup) GroupMax() int { return 1024 }

func (g *nopGroup) GroupRun(d transport.Deferred, fp *wire.Fingerprint, in, out []byte) error {
	g.calls++
	copy(out, in)
	return nil
}

// groupComm returns rank 0 of a NewLocal pair whose collectives go to a
// nopGroup.
func groupComm(tb testing.TB, cfg *Config) (*Comm, *nopGroup) {
	comms, err := NewLocal(context.Background(), 2, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	g := &nopGroup{}
	c := comms[0]
	c.path.InitGroup(struct {
		transport.Transport
		transport.Group
	}{c.path.T, g})
	return c, g
}

// TestGroupPath: small calls of the group collectives take the group path
// and allocate nothing; larger ones, the other collectives and collectives
// forced to an algorithm by HCOMM_ALGO do not.
func TestGroupPath(t *testing.T) {
	ctx := context.Background()
	c, g := groupComm(t, nil)
	small := make([]float32, 256)
	out := make([]float32, 512)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"AllReduce 1 KiB", func() error { return AllReduce(ctx, c, small, out[:256], Sum) }},
		{"Barrier", func() error { return c.Barrier(ctx) }},
		{"Broadcast 1 KiB", func() error { return Broadcast(ctx, c, small, 1) }},
		{"Reduce", func() error { return Reduce(ctx, c, small, out[:256], Max, 0) }},
		{"AllGather 1 KiB per rank", func() error { return AllGather(ctx, c, small, out) }},
		{"Gather", func() error { return Gather(ctx, c, small, out, 0) }},
		{"ReduceScatter 1 KiB", func() error { return ReduceScatter(ctx, c, small, out[:128], Sum) }},
		{"AllToAll 1 KiB", func() error { return AllToAll(ctx, c, small, out[:256]) }},
		{"Scatter 1 KiB", func() error { return Scatter(ctx, c, small, out[:128], 0) }},
	} {
		before := g.calls
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := g.calls - before; got != 1 {
			t.Errorf("%s: %d group calls, want 1", tc.name, got)
		}
		if n := allocs.PerRun(50, 0, func() { tc.call() }); n != 0 {
			t.Errorf("%s allocates %.1f times per call", tc.name, n)
		}
	}
	for _, k := range []call{
		{Coll: sched.AllReduce, Call: argcheck.Call{Count: 257, DT: reduce.Float32}},
		{Coll: sched.AllGather, Call: argcheck.Call{Count: 1025, DT: reduce.Uint8}},
		{Coll: sched.AllToAll, Call: argcheck.Call{Count: 129, DT: reduce.Float32}}, // 2 ranks × 129 × 4 B
		{Coll: sched.ReduceScatter, Call: argcheck.Call{Count: 513, DT: reduce.Uint8}},
		{Coll: sched.Scatter, Call: argcheck.Call{Count: 65, DT: reduce.Float64}},
		{Coll: sched.AllGather, Call: argcheck.Call{Count: 1, Spec: &sched.Spec{}, DT: reduce.Uint8}},
	} {
		if c.path.GroupFits(&k) {
			t.Errorf("%v of %d elements (spec %v) takes the group path", k.Coll, k.Count, k.Spec != nil)
		}
	}
	forced, _ := groupComm(t, &Config{Algo: "allreduce=ring"})
	if k := (call{Coll: sched.AllReduce, Call: argcheck.Call{Count: 2, DT: reduce.Uint8}}); forced.path.GroupFits(&k) {
		t.Error("an AllReduce forced to ring takes the group path")
	}
	if k := (call{Coll: sched.Barrier, Call: argcheck.Call{DT: reduce.Uint8}}); !forced.path.GroupFits(&k) {
		t.Error("a Barrier beside an AllReduce forced to ring does not take the group path")
	}
}

// TestGroupRepeatedShape: a call of the shape just run is still checked
// for where its buffers lie: overlapping buffers are refused (and nothing
// runs), in place is told from out of place, and the communicator stays
// usable.
func TestGroupRepeatedShape(t *testing.T) {
	ctx := context.Background()
	c, g := groupComm(t, nil)
	buf := make([]float32, 8)
	in, out := buf[0:4], buf[4:8]
	in[0] = 7
	for i, tc := range []struct {
		send, recv []float32
		bad        bool
	}{{in, out, false}, {in, out, false}, {buf[0:4], buf[2:6], true}, {in, in, false}, {buf[1:5], buf[4:8], true}, {in, out, false}} {
		before := g.calls
		err := AllReduce(ctx, c, tc.send, tc.recv, Sum)
		if tc.bad != errors.Is(err, ErrInvalidArgument) || (!tc.bad && err != nil) {
			t.Fatalf("call %d: err = %v, want invalid argument %v", i, err, tc.bad)
		}
		if ran := g.calls - before; ran != 1 && !tc.bad || ran != 0 && tc.bad {
			t.Fatalf("call %d: %d group calls", i, ran)
		}
		if !tc.bad && tc.recv[0] != 7 {
			t.Fatalf("call %d: recv[0] = %v, want 7", i, tc.recv[0])
		}
	}
}

// BenchmarkGroupCallPath measures the root package's own cost of a small
// AllReduce on the group path: everything but the transport's work. On a
// loaded machine, cpu-ns/op (the process's CPU time per call) is steadier
// than ns/op.
func BenchmarkGroupCallPath(b *testing.B) {
	ctx := context.Background()
	c, _ := groupComm(b, &Config{Timeout: time.Minute})
	in, out := make([]float32, 2), make([]float32, 2)
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if err := AllReduce(ctx, c, in, out, Sum); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkGroupBroadcastCallPath is BenchmarkGroupCallPath for an
// 8-byte Broadcast at a rank that is not the root (the reader).
func BenchmarkGroupBroadcastCallPath(b *testing.B) {
	ctx := context.Background()
	c, _ := groupComm(b, &Config{Timeout: time.Minute})
	buf := make([]float32, 2)
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if err := Broadcast(ctx, c, buf, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// TestGroupPathOff: HCOMM_SHM_SLOTS=0 keeps every collective on its
// schedule.
func TestGroupPathOff(t *testing.T) {
	t.Setenv("HCOMM_SHM_SLOTS", "0")
	c, _ := groupComm(t, nil)
	for _, k := range []call{{Coll: sched.AllReduce, Call: argcheck.Call{Count: 2, DT: reduce.Uint8}}, {Coll: sched.Barrier, Call: argcheck.Call{DT: reduce.Uint8}}} {
		if c.path.GroupFits(&k) {
			t.Errorf("with HCOMM_SHM_SLOTS=0 a %v fits the group path", k.Coll)
		}
	}
}

// stopTimer is a flight-recorder tick that never fires by itself and
// counts its Stops.
type stopTimer struct{ armed, stopped bool }

func (t *stopTimer) Reset(time.Duration) bool { t.armed = true; return false }
func (t *stopTimer) Stop() bool               { t.armed, t.stopped = false, true; return true }

// TestCloseStopsRecorderTick: a group call that completes without waiting
// arms the flight recorder's stamping tick; Close stops it.
func TestCloseStopsRecorderTick(t *testing.T) {
	c, _ := groupComm(t, nil)
	tm := &stopTimer{}
	c.path.Rec.AfterFunc = func(time.Duration, func()) trace.Timer { tm.armed = true; return tm }
	x := make([]float32, 2)
	if err := AllReduce(context.Background(), c, x, x, Sum); err != nil {
		t.Fatal(err)
	}
	if !tm.armed {
		t.Fatal("the group call did not arm the tick")
	}
	c.Close()
	if tm.armed || !tm.stopped {
		t.Errorf("after Close: tick armed %v, stopped %v", tm.armed, tm.stopped)
	}
}
