package traceevent

import (
	"os"
	"path/filepath"
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
