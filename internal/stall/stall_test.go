package stall

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/diag"
	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/trace"
	"github.com/hcomm-go/hcomm/internal/wire"
)

func TestCompare(t *testing.T) {
	fp := wire.Fingerprint{Seq: 7, Coll: sched.AllReduce, Count: 4}
	mine := (&trace.Entry{Name: "AllReduce", FP: fp}).Call()
	other := (&trace.Entry{Name: "Broadcast", FP: wire.Fingerprint{Seq: 7, Coll: sched.Broadcast, Count: 4}}).Call()
	for _, tc := range []struct {
		name  string
		calls []string
		peer  int
		want  string // in the error; "" means no error
	}{
		{"all agree", []string{mine, mine, mine}, -1, ""},
		{"unknown ranks are not blamed", []string{"", mine, ""}, -1, ""},
		{"one differs", []string{mine, mine, other}, 2, "rank 2 called " + other},
		{"own slot never compared", []string{mine, other, other}, 2, "rank 2 called"},
		{"several differ", []string{other, mine, other, other}, 0, "ranks 0, 2-3 differ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer, err := Compare(1, 7, "AllReduce", &fp, tc.calls)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Compare = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, errs.ErrMismatch) || !strings.Contains(err.Error(), tc.want) || peer != tc.peer {
				t.Fatalf("Compare = %d, %v; want peer %d and an ErrMismatch containing %q", peer, err, tc.peer, tc.want)
			}
		})
	}
}

func TestCallsFromStates(t *testing.T) {
	states := []*diag.CommState{
		{Snapshot: trace.Snapshot{Recent: []trace.SeqCall{{Seq: 6, Call: "a"}, {Seq: 7, Call: "b"}}}},
		nil,
		{Snapshot: trace.Snapshot{Recent: []trace.SeqCall{{Seq: 5, Call: "c"}}}},
	}
	calls := make([]string, 3)
	CallsFromStates(states, 7, calls)
	if calls[0] != "b" || calls[1] != "" || calls[2] != "" {
		t.Fatalf("calls = %q", calls)
	}
}

// Groups of derived communicators are found again by id.
func TestGroupSub(t *testing.T) {
	g := NewGroup(2)
	a, b := g.Sub("x", 3), g.Sub("x", 3)
	if a != b || len(a.CallsOf(1)) != 3 {
		t.Fatal("Sub does not return one group per id")
	}
	var rec trace.Recorder
	a.Set(1, &rec)
	if c := a.CallsOf(1); c[1] != "" {
		t.Fatalf("CallsOf before any call = %q", c)
	}
	// Taken by all three ranks, the group leaves the registry, which
	// would otherwise hold their communicators for as long as any
	// communicator of the job is in use.
	if c := g.Sub("x", 3); c != a {
		t.Fatal("the third rank has another group")
	}
	if len(g.reg.m) != 0 {
		t.Fatalf("registry still holds %d groups all ranks took", len(g.reg.m))
	}
	a.Leave(1)
	if a.recs[1] != nil {
		t.Fatal("Leave kept the recorder")
	}
}

// fakeComm is a two-rank communicator whose peer called other for every
// collective.
type fakeComm struct {
	other    string
	mismatch chan uint64
}

func (f *fakeComm) Rank() int     { return 0 }
func (f *fakeComm) Healthy() bool { return true }
func (f *fakeComm) CallsOf(seq uint64) []string {
	return []string{"", f.other}
}
func (f *fakeComm) Mismatch(seq uint64, name string, peer int, err error) {
	if peer == 1 && errors.Is(err, errs.ErrMismatch) {
		select {
		case f.mismatch <- seq:
		default:
		}
	}
}

// TestCheckFinds: a collective that stays running is checked against the
// peer's call and its mismatch reported, also right after a stream of
// collectives that came and went while the timer lapsed and re-armed
// (Begin takes no lock, so an arm lost between the two would hang here).
func TestCheckFinds(t *testing.T) {
	defer func(f time.Duration) { First = f }(First)
	First = 50 * time.Microsecond
	good := wire.Fingerprint{Coll: sched.AllReduce, Count: 4}
	bad := wire.Fingerprint{Coll: sched.Broadcast, Count: 4}
	other := (&trace.Entry{Name: "AllReduce", FP: good}).Call()
	f := &fakeComm{other: other, mismatch: make(chan uint64, 1)}
	var rec trace.Recorder
	var s Check
	s.Init(f, &rec)
	defer s.Stop()
	seq := uint64(0)
	bads := map[uint64]bool{} // an earlier round's may be reported again before its End
	for round := range 20 {
		for range 200 * round {
			seq++
			good.Seq = seq
			rec.Begin("AllReduce", &good, time.Now())
			s.Begin(seq, time.Now())
			s.End()
		}
		seq++
		bad.Seq = seq
		bads[seq] = true
		rec.Begin("Broadcast", &bad, time.Now())
		s.Begin(seq, time.Now())
	wait:
		for {
			select {
			case got := <-f.mismatch:
				if got == seq {
					break wait
				}
				if !bads[got] {
					t.Fatalf("mismatch reported for #%d, want #%d", got, seq)
				}
			case <-time.After(time.Minute):
				t.Fatalf("round %d: no mismatch reported for #%d", round, seq)
			}
		}
		s.End()
	}
}

// TestCheckBeginWhileLapsing: a collective that begins while the timer,
// finding none running, is about to lapse (Begin sees it armed and does
// not arm it) is still checked.
func TestCheckBeginWhileLapsing(t *testing.T) {
	defer func(f time.Duration) { First = f }(First)
	First = 50 * time.Microsecond
	bad := wire.Fingerprint{Seq: 2, Coll: sched.Broadcast, Count: 4}
	good := wire.Fingerprint{Seq: 1, Coll: sched.AllReduce, Count: 4}
	f := &fakeComm{other: (&trace.Entry{Name: "AllReduce", FP: good}).Call(), mismatch: make(chan uint64, 1)}
	var rec trace.Recorder
	var s Check
	s.Init(f, &rec)
	defer s.Stop()
	began := make(chan struct{})
	s.beforeLapse = func() {
		s.beforeLapse = nil
		rec.Begin("Broadcast", &bad, time.Now())
		s.Begin(bad.Seq, time.Now())
		close(began)
	}
	rec.Begin("AllReduce", &good, time.Now())
	s.Begin(good.Seq, time.Now())
	s.End()
	<-began
	select {
	case got := <-f.mismatch:
		if got != bad.Seq {
			t.Fatalf("mismatch reported for #%d, want #%d", got, bad.Seq)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no mismatch reported for a collective begun as the timer lapsed")
	}
}
