package trace

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/wire"
)

func TestClock(t *testing.T) {
	c := NewClock()
	before := time.Now()
	a := c.Now()
	b := c.Now()
	if b.Before(a) {
		t.Errorf("clock went back: %v then %v", a, b)
	}
	if d := a.Sub(before); d < -time.Millisecond || d > time.Second {
		t.Errorf("clock is %v off time.Now", d)
	}
	if d := time.Since(a); d < 0 || d > time.Second {
		t.Errorf("time.Since(clock) = %v", d)
	}
	if z := (Clock{}).Now(); time.Since(z) > time.Second {
		t.Errorf("zero clock: %v", z)
	}
}

func TestRecorder(t *testing.T) {
	var r Recorder
	c := NewClock()
	fp := wire.Fingerprint{Seq: 1}
	s := r.Begin("AllReduce", &fp, c.Now())
	time.Sleep(2 * time.Millisecond)
	r.End(s, nil)
	fp.Seq = 2
	s = r.Begin("Broadcast", &fp, c.Now())
	r.End(s, errors.New("boom"))
	fp.Seq = 3
	r.Begin("Barrier", &fp, c.Now())

	es := r.Entries()
	if len(es) != 3 {
		t.Fatalf("%d entries, want 3", len(es))
	}
	if es[0].State != Done || es[1].State != Failed || es[2].State != Running {
		t.Errorf("states %v %v %v", es[0].State, es[1].State, es[2].State)
	}
	if d := es[0].End.Sub(es[0].Start); d < 2*time.Millisecond || d > time.Second {
		t.Errorf("first op took %v, want about 2ms", d)
	}
	if es[1].Err != "boom" {
		t.Errorf("error %q", es[1].Err)
	}
	snap := r.Snapshot()
	if snap.Entered != 3 || snap.Completed != 1 || snap.State != "running" {
		t.Errorf("snapshot %+v", snap)
	}
	if f := r.Format(); !strings.Contains(f, "#1 ") || !strings.Contains(f, "took=") || !strings.Contains(f, `err="boom"`) {
		t.Errorf("format:\n%s", f)
	}
	// The ring keeps the last Size operations.
	for i := range 2 * Size {
		fp.Seq = uint64(10 + i)
		r.End(r.Begin("AllReduce", &fp, c.Now()), nil)
	}
	if es := r.Entries(); len(es) != Size || es[0].Seq != uint64(10+Size) {
		t.Errorf("after wrapping: %d entries from #%d", len(es), es[0].Seq)
	}
}

// Point-to-point calls are recorded but leave the collective sequence, and
// what Snapshot reports, alone.
func TestRecorderP2P(t *testing.T) {
	var r Recorder
	coll := &wire.Fingerprint{Seq: 3, Coll: sched.AllReduce, DType: reduce.Float32, Op: reduce.Sum, Count: 4}
	s := r.Begin("AllReduce", coll, time.Now())
	r.End(s, nil)
	p2p := &wire.Fingerprint{Seq: 9, Coll: wire.CollSendRecv, DType: reduce.Float32, Count: 4}
	r.BeginP2P("Send", p2p, 2, time.Now()) // still running
	done := r.BeginP2P("Recv", &wire.Fingerprint{Seq: 1, Coll: wire.CollSendRecv, DType: reduce.Int8, Count: 1}, 1, time.Now())
	r.End(done, nil)
	snap := r.Snapshot()
	if snap.Entered != 3 || snap.Completed != 3 || snap.State != "done" || !strings.HasPrefix(snap.Call, "AllReduce(") {
		t.Errorf("Snapshot = %+v, want op #3's", snap)
	}
	if len(snap.P2P) != 1 || snap.P2P[0] != "Send(float32, 4, tag 0) to rank 2" {
		t.Errorf("Snapshot.P2P = %q, want the running Send", snap.P2P)
	}
	if es := r.Entries(); len(es) != 3 || es[1].Name != "Send" || es[1].State != Running {
		t.Errorf("Entries = %+v", es)
	}
}

// TestRecorderRecord: an operation recorded at its end is entered and
// completed (or failed) like one begun and ended, and is found by CallOf.
func TestRecorderRecord(t *testing.T) {
	var r Recorder
	c := NewClock()
	r.SetClock(c)
	before := c.Now()
	fp := wire.Fingerprint{Seq: 1, Coll: sched.AllReduce, DType: reduce.Float32, Op: reduce.Sum, Count: 2}
	r.Record("AllReduce", &fp, nil)
	fp2 := fp
	fp2.Seq = 2
	// A failure stamps itself and what came before it.
	r.Record("AllReduce", &fp2, errors.New("boom"))
	after := c.Now()
	es := r.Entries()
	if len(es) != 2 || es[0].State != Done || es[1].State != Failed || es[1].Err != "boom" {
		t.Fatalf("entries %+v", es)
	}
	for _, e := range es {
		if e.Start.Before(before) || e.End.After(after) || !e.Start.Equal(e.End) {
			t.Errorf("#%d start %v end %v, want both in [%v, %v]", e.Seq, e.Start, e.End, before, after)
		}
	}
	if s := r.Snapshot(); s.Entered != 2 || s.Completed != 1 || s.State != "failed" {
		t.Errorf("snapshot %+v", s)
	}
	if call, ok := r.CallOf(1); !ok || !strings.HasPrefix(call, "AllReduce(") {
		t.Errorf("CallOf(1) = %q, %v", call, ok)
	}
	// A slot reused by Begin forgets the recorded end.
	for i := range Size {
		fp3 := fp
		fp3.Seq = uint64(3 + i)
		r.Begin("AllReduce", &fp3, c.Now())
	}
	for _, e := range r.Entries() {
		if e.State != Running || !e.End.IsZero() || e.Start.IsZero() {
			t.Fatalf("entry %+v after Begin over recorded slots", e)
		}
	}
}

// TestRecorderStamps: operations Record records without a time get one
// no earlier than their end and no later than the next reading of the
// clock: a Begin's start, a reader of the ring, or the recorder's tick.
func TestRecorderStamps(t *testing.T) {
	var r Recorder
	c := NewClock()
	r.SetClock(c)
	fp := wire.Fingerprint{Coll: sched.AllReduce, DType: reduce.Float32, Op: reduce.Sum, Count: 2}
	record := func(n int) (time.Time, time.Time) {
		before := c.Now()
		for range n {
			fp.Seq++
			r.Record("AllReduce", &fp, nil)
		}
		return before, c.Now()
	}
	check := func(what string, es []Entry, lo, hi time.Time) {
		t.Helper()
		for _, e := range es {
			if e.End.Before(lo) || e.End.After(hi) || !e.Start.Equal(e.End) {
				t.Errorf("%s: #%d ended %v, want in [%v, %v]", what, e.Seq, e.End, lo, hi)
			}
		}
	}
	// Stamped by a reader.
	lo, _ := record(3)
	check("read", r.Entries(), lo, c.Now())
	// Stamped by the tick (called here; the timer may have run it too), then
	// by a Begin, with its start, more than Size of them.
	lo, _ = record(2)
	r.tock()
	hi := c.Now()
	check("tick", r.Entries()[3:], lo, hi)
	lo, _ = record(Size + 5)
	start := c.Now()
	r.Begin("Barrier", &wire.Fingerprint{Seq: fp.Seq + 1, Coll: sched.Barrier}, start)
	es := r.Entries()
	check("begin", es[:Size-1], lo, start)
	if s := r.Snapshot(); s.State != "running" || s.Entered != fp.Seq+1 || s.Completed != fp.Seq {
		t.Errorf("snapshot %+v", s)
	}
	// A tick with nothing pending stops ticking; the next Record arms it
	// again.
	r.tock()
	r.mu.Lock()
	ticking := r.ticking
	r.mu.Unlock()
	if ticking {
		t.Error("still ticking with nothing to stamp")
	}
	record(1)
	r.mu.Lock()
	ticking = r.ticking
	r.mu.Unlock()
	if !ticking {
		t.Error("not ticking with an entry to stamp")
	}
}

// fakeTimer is a tick that never fires by itself.
type fakeTimer struct {
	f       func()
	armed   bool
	stopped int
}

func (t *fakeTimer) Reset(time.Duration) bool { was := t.armed; t.armed = true; return was }
func (t *fakeTimer) Stop() bool               { was := t.armed; t.armed = false; t.stopped++; return was }

// TestRecorderStop: Stop disarms the tick a Record armed and stamps what
// was pending; later Records are stamped at once and arm nothing, and a
// tick already under way does not re-arm.
func TestRecorderStop(t *testing.T) {
	var tm *fakeTimer
	var r Recorder
	r.AfterFunc = func(d time.Duration, f func()) Timer {
		tm = &fakeTimer{f: f, armed: true}
		return tm
	}
	fp := wire.Fingerprint{Seq: 1, Coll: sched.AllReduce}
	r.Record("AllReduce", &fp, nil)
	if tm == nil || !tm.armed {
		t.Fatal("a Record did not arm the tick")
	}
	r.Stop()
	if tm.armed || tm.stopped != 1 {
		t.Errorf("after Stop: tick armed %v, stopped %d times", tm.armed, tm.stopped)
	}
	fp.Seq = 2
	r.Record("AllReduce", &fp, nil)
	tm.f() // a tick that was already running when Stop came
	if tm.armed {
		t.Error("the tick was armed again after Stop")
	}
	for _, e := range r.Entries() {
		if e.End.IsZero() {
			t.Errorf("#%d has no end after Stop", e.Seq)
		}
	}
}

// TestRecorderRecordOverwrites: a collective recorded at its end while the
// tick is armed (Record's short path) takes over a slot whatever it held
// before — a failed call with its error and times, a Send with its peer —
// and is entered and completed like any other.
func TestRecorderRecordOverwrites(t *testing.T) {
	var r Recorder
	r.AfterFunc = func(time.Duration, func()) Timer { return &fakeTimer{armed: true} }
	c := NewClock()
	r.SetClock(c)
	for i := range Size {
		fp := wire.Fingerprint{Seq: uint64(i + 1), Coll: sched.AllGather, DType: reduce.Int8, Count: 9}
		if i%2 == 0 {
			fp.Coll = wire.CollSendRecv
			r.End(r.BeginP2P("Send", &fp, 3, c.Now()), nil)
			continue
		}
		r.End(r.Begin("AllGather", &fp, c.Now()), errors.New("boom"))
	}
	before := c.Now()
	fp := wire.Fingerprint{Coll: sched.Broadcast, DType: reduce.Uint8, Root: 1, Count: 8}
	for i := range Size {
		fp.Seq = uint64(100 + i)
		r.Record("Broadcast", &fp, nil)
	}
	es := r.Entries() // stamps them, with its reading of the clock
	after := c.Now()
	if len(es) != Size {
		t.Fatalf("%d entries, want %d", len(es), Size)
	}
	for i, e := range es {
		want := fp
		want.Seq = uint64(100 + i)
		if e.Seq != want.Seq || e.Name != "Broadcast" || e.FP != want || e.State != Done || e.Err != "" || e.Peer != 0 ||
			e.Start.Before(before) || e.End.After(after) || !e.Start.Equal(e.End) {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
	if s := r.Snapshot(); s.Entered != fp.Seq || s.Completed != fp.Seq || s.State != "done" || len(s.P2P) != 0 {
		t.Errorf("snapshot %+v", s)
	}
	if call, ok := r.CallOf(fp.Seq); !ok || !strings.HasPrefix(call, "Broadcast(") {
		t.Errorf("CallOf(%d) = %q, %v", fp.Seq, call, ok)
	}
}
