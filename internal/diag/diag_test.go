package diag

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/trace"
	"github.com/hcomm-go/hcomm/store"
)

func TestRankList(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{[]int{3}, "rank 3"},
		{[]int{0, 1}, "ranks 0-1"},
		{[]int{0, 2}, "ranks 0, 2"},
		{[]int{0, 1, 2}, "ranks 0-2"},
		{[]int{0, 1, 2, 5}, "ranks 0-2, 5"},
		{[]int{1, 3, 4, 5, 7, 8}, "ranks 1, 3-5, 7-8"},
	} {
		if got := RankList(tc.in); got != tc.want {
			t.Errorf("RankList(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func st(entered, completed uint64, state, call string) *CommState {
	return &CommState{Snapshot: trace.Snapshot{Entered: entered, Completed: completed, State: state, Call: call}}
}

func TestExplain(t *testing.T) {
	const call = "AllReduce(float32, 262144, sum)"
	for _, tc := range []struct {
		name   string
		states []*CommState
		want   string
	}{
		{"one late rank", []*CommState{st(42, 41, "running", call), st(42, 41, "running", call), st(42, 41, "running", call), st(41, 41, "done", "Barrier")},
			"ranks 0-2 wait in op #42 AllReduce(float32, 262144, sum); rank 3 last completed op #41 and has not entered #42"},
		{"one waiting rank", []*CommState{st(42, 41, "running", call), st(41, 40, "running", "Barrier")},
			"rank 0 waits in op #42 AllReduce(float32, 262144, sum); rank 1 last completed op #40 and has not entered #42"},
		{"silent rank", []*CommState{st(42, 41, "running", call), nil},
			"rank 0 waits in op #42 AllReduce(float32, 262144, sum); rank 1 did not answer (stopped, hung, or cut off from the store)"},
		{"failed in the op", []*CommState{st(42, 41, "running", call), st(42, 41, "failed", call)},
			"rank 0 waits in op #42 AllReduce(float32, 262144, sum); rank 1 failed op #42 AllReduce(float32, 262144, sum)"},
		{"moved on", []*CommState{st(42, 41, "running", call), st(43, 42, "running", "Broadcast(int8, 1, root 0)")},
			"rank 0 waits in op #42 AllReduce(float32, 262144, sum); rank 1 moved on to op #43 Broadcast(int8, 1, root 0) (running)"},
		{"groups keep first-seen order", []*CommState{nil, st(42, 41, "running", call), nil, st(42, 41, "running", call)},
			"ranks 0, 2 did not answer (stopped, hung, or cut off from the store); ranks 1, 3 wait in op #42 AllReduce(float32, 262144, sum)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Explain(42, call, tc.states); got != tc.want {
				t.Errorf("Explain =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestExplainP2P(t *testing.T) {
	const ar = "AllReduce(float32, 4, sum)"
	for _, tc := range []struct {
		name  string
		state *CommState
		want  string
	}{
		{"silent", nil, "rank 1 (the peer) did not answer (stopped, hung, or cut off from the store)"},
		{"no collective yet", st(0, 0, "", ""), "rank 1 (the peer) has run no collective and is in no Send or Recv"},
		{"in a collective", st(42, 41, "running", ar), "rank 1 (the peer) last completed op #41 and waits in op #42 AllReduce(float32, 4, sum)"},
		{"idle", st(42, 42, "done", ar), "rank 1 (the peer) is past op #42 AllReduce(float32, 4, sum) (done) and is in no Send or Recv"},
		{"call out of the ring", st(42, 42, "", ""), "rank 1 (the peer) last completed op #42 and is in no Send or Recv"},
		{"in a Recv", &CommState{Snapshot: trace.Snapshot{Entered: 1, Completed: 1, State: "done", P2P: []string{"Recv(float32, 4, tag 7) from rank 0"}}},
			"rank 1 (the peer) waits in Recv(float32, 4, tag 7) from rank 0"},
		{"in a Send and a Recv", &CommState{Snapshot: trace.Snapshot{P2P: []string{"Send(int8, 1, tag 0) to rank 2", "Recv(int8, 1, tag 0) from rank 2"}}},
			"rank 1 (the peer) waits in Send(int8, 1, tag 0) to rank 2 and in Recv(int8, 1, tag 0) from rank 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExplainP2P(1, []*CommState{st(1, 1, "done", ar), tc.state}); got != tc.want {
				t.Errorf("ExplainP2P =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

type source struct {
	id    string
	rank  int
	snap  trace.Snapshot
	paths []string
}

func (s *source) ID() string               { return s.id }
func (s *source) Rank() int                { return s.rank }
func (s *source) Snapshot() trace.Snapshot { return s.snap }
func (s *source) Paths() []string          { return s.paths }

// TestReport runs the dump protocol over a real store: two processes'
// watchers answer, one rank is silent, and the report says so and lands in
// the store for the launcher.
func TestReport(t *testing.T) {
	srv, err := store.NewServer(store.ServerConfig{Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	open := func() store.Store {
		s, err := store.Open(ctx, "tcp://"+srv.Addr().String(), "t")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const call = "AllReduce(float32, 4, sum)"
	var ws []*Watcher
	var stores []store.Store
	for w, snap := range []trace.Snapshot{{Entered: 7, Completed: 6, State: "running", Call: call}, {Entered: 6, Completed: 6, State: "done"}} {
		s := open()
		stores = append(stores, s)
		wt := NewWatcher(s, w)
		wt.Add(&source{id: "world", rank: w, snap: snap})
		other := &source{id: "other", rank: 0}
		wt.Add(other)
		wt.Remove(other)
		ws = append(ws, wt)
	}
	defer func() {
		for i, wt := range ws {
			stores[i].Close()
			wt.Stop()
		}
	}()
	if ps := ws[0].State(); len(ps.Comms) != 1 || ps.Comms[0].Comm != "world" || ps.World != 0 {
		t.Errorf("State = %+v", ps)
	}
	me := open()
	defer me.Close()
	var log bytes.Buffer
	rep := Report(me, slog.New(slog.NewTextHandler(&log, nil)), "world", 0, []int{0, 1, 2}, "op #7 "+call,
		func(s []*CommState) string { return Explain(7, call, s) })
	want := "rank 0 waits in op #7 AllReduce(float32, 4, sum); rank 1 last completed op #6 and has not entered #7; rank 2 did not answer (stopped, hung, or cut off from the store)"
	if rep != want {
		t.Errorf("Report =\n%s\nwant\n%s", rep, want)
	}
	if !strings.Contains(log.String(), "operation timed out") {
		t.Errorf("log: %s", log.String())
	}
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := me.Get(gctx, ReportKey(0))
	if err != nil || !strings.Contains(string(v), want) {
		t.Errorf("stored report %q, %v", v, err)
	}
	var ps ProcState
	if b, err := me.Get(gctx, StateKey(1, 1)); err != nil || json.Unmarshal(b, &ps) != nil || ps.World != 1 {
		t.Errorf("state of dump 1 at world 1: %s, %v", b, err)
	}
}

// TestWatcherPaths: a communicator's path lines are in the answers while
// it is part of them, and gone once it is removed.
func TestWatcherPaths(t *testing.T) {
	srv, err := store.NewServer(store.ServerConfig{Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	s, err := store.Open(context.Background(), "tcp://"+srv.Addr().String(), "t")
	if err != nil {
		t.Fatal(err)
	}
	wt := NewWatcher(s, 0)
	defer func() { s.Close(); wt.Stop() }()
	world, sub := &source{id: "world", paths: []string{"peer 1 path 0 up"}}, &source{id: "sub"}
	wt.Add(world)
	wt.Add(sub)
	ps := wt.State()
	if len(ps.Comms) != 2 || strings.Join(ps.Comms[0].Paths, ";") != "peer 1 path 0 up" || ps.Comms[1].Paths != nil {
		t.Fatalf("State = %+v", ps)
	}
	b, _ := json.Marshal(ps)
	var back ProcState
	if err := json.Unmarshal(b, &back); err != nil || len(back.Comms[0].Paths) != 1 {
		t.Fatalf("%s: %+v, %v", b, back, err)
	}
	wt.Remove(world)
	if ps := wt.State(); len(ps.Comms) != 1 || ps.Comms[0].Comm != "sub" {
		t.Errorf("State after the world was removed = %+v", ps)
	}
}
