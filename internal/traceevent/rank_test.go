package traceevent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRank(t *testing.T) {
	pattern := filepath.Join(t.TempDir(), "trace.json")
	r, err := CreateRank(pattern, 3)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	r.Slice("comm a", "AllReduce", "collective", at, time.Millisecond, map[string]any{"seq": 1})
	r.Instant("stream s", "record e", "stream", at, nil)
	r.Slice("comm a", "Barrier", "collective", at.Add(time.Millisecond), time.Millisecond, nil)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r.Slice("comm a", "late", "collective", at, time.Millisecond, nil) // after Close: not written
	f, err := os.Open(RankFile(pattern, 3))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	tids := map[string]int{}
	for _, e := range evs {
		if e.PID != 3 {
			t.Errorf("event %q in process %d, want 3", e.Name, e.PID)
		}
		if e.Ph == "M" && e.Name == "thread_name" {
			tids[e.Args["name"].(string)] = e.TID
		}
		if e.Name == "late" {
			t.Error("an event written after Close is in the file")
		}
	}
	if len(tids) != 2 || tids["comm a"] == tids["stream s"] {
		t.Fatalf("threads %v, want two: comm a and stream s", tids)
	}
	if n := len(evs); n != 9 { // process name and sort index, 2 × thread name and sort index, 3 events
		t.Fatalf("%d events, want 9: %+v", n, evs)
	}
}

// Collective, StreamItem and Bucket put each event on its thread with
// its description as args.
func TestRankEvents(t *testing.T) {
	pattern := filepath.Join(t.TempDir(), "trace.json")
	r, err := CreateRank(pattern, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	r.Collective(Op{Comm: "world", Name: "AllReduce", DType: "float32", Algo: "ring", Rank: 0, Peers: 2, Bytes: 64,
		Chunks: 2, Seq: 7, Start: at, Duration: time.Millisecond, Wait: 500 * time.Microsecond, Err: errors.New("boom")})
	r.StreamItem("world", "comm", "record", "done", at, 0, nil)
	r.StreamItem("world", "comm", "wait", "grads", at, time.Millisecond, nil)
	r.StreamItem("world", "comm", "AllReduce", "", at, time.Millisecond, nil)
	r.Bucket("world", 1, 32, 2, 1, true, at)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(RankFile(pattern, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	threads := map[int]string{}
	var got []string
	for _, e := range evs {
		if e.Ph == "M" && e.Name == "thread_name" {
			threads[e.TID] = e.Args["name"].(string)
		}
		if e.Ph == "X" || e.Ph == "i" {
			got = append(got, fmt.Sprintf("%s %s|%s|%s|%v", e.Ph, threads[e.TID], e.Cat, e.Name, e.Args))
		}
	}
	want := []string{
		"X comm world|collective|AllReduce|map[algo:ring bytes:64 chunks:2 comm:world dtype:float32 error:boom peers:2 rank:0 seq:7 wait_us:500]",
		"i stream comm|stream|record done|map[comm:world event:done stream:comm]",
		"X stream comm|stream|wait grads|map[comm:world event:grads stream:comm]",
		"X stream comm|stream|AllReduce|map[comm:world stream:comm]",
		"i comm world|bucket|bucket 1|map[bucket:1 bytes:32 comm:world flushed:true not_ready:1 tensors:2]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
