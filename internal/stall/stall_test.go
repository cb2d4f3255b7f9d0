package stall

import (
	"errors"
	"strings"
	"testing"

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
}
