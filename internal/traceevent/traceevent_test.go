package traceevent

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// rankFile writes what one rank's observer would: its process and stream
// tracks and a slice per collective.
func rankFile(t *testing.T, rank int, base time.Time) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Process(rank, "rank "+string(rune('0'+rank)))
	w.Thread(rank, 0, "collectives")
	w.Thread(rank, 1, "stream 1")
	for i := range 3 {
		start := base.Add(time.Duration(i) * time.Millisecond)
		if err := w.Slice(rank, 0, "AllReduce", "collective", start, 250*time.Microsecond,
			map[string]any{"algo": "ring", "bytes": 4096, "dtype": "float32", "seq": i}); err != nil {
			t.Fatal(err)
		}
	}
	w.Slice(rank, 1, "AllGather", "collective", base, 1500*time.Nanosecond, nil)
	w.Instant(rank, 0, "bucket flush", "bucket", base, map[string]any{"tensors": 2})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestWriteValidates(t *testing.T) {
	base := time.Unix(1_700_000_000, 123_456_789)
	b := rankFile(t, 2, base)
	// The file is JSON of the object form with the fields the format
	// requires, in its units.
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
		Unit        string           `json:"displayTimeUnit"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	if doc.Unit != "ns" || len(doc.TraceEvents) != 4+2+3+1+1 {
		t.Fatalf("unit %q, %d events", doc.Unit, len(doc.TraceEvents))
	}
	evs, err := Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var slices int
	for _, e := range evs {
		if e.PID != 2 {
			t.Errorf("pid %d, want 2", e.PID)
		}
		switch e.Ph {
		case "X":
			slices++
			if e.Dur == nil {
				t.Fatalf("X without dur: %+v", e)
			}
			// ts and dur are microseconds.
			if e.Name == "AllReduce" && (*e.Dur != 250 || e.TS < Micros(base) || e.TS > Micros(base)+2001) {
				t.Errorf("AllReduce ts %f dur %f (µs), base %f", e.TS, *e.Dur, Micros(base))
			}
			if e.Name == "AllGather" && (*e.Dur != 1.5 || e.TID != 1) {
				t.Errorf("AllGather dur %f tid %d", *e.Dur, e.TID)
			}
		case "M", "i":
		default:
			t.Errorf("unexpected phase %q", e.Ph)
		}
	}
	if slices != 4 {
		t.Errorf("%d slices", slices)
	}
	if want := 1_700_000_000_123_456.789; Micros(base) != want {
		t.Errorf("Micros = %f, want %f", Micros(base), want)
	}
}

func TestReadRejects(t *testing.T) {
	for _, c := range []struct{ in, err string }{
		{``, "empty"},
		{`"x"`, "not an object or array"},
		{`{"events": []}`, "traceEvents"},
		{`{"traceEvents": [{"name":"a","ts":1,"pid":0,"tid":0}]}`, `no "ph"`},
		{`[{"name":"a","ph":"Q","ts":1}]`, "unknown phase"},
		{`[{"ph":"X","ts":1,"dur":2}]`, "without \"name\""},
		{`[{"name":"a","ph":"X","dur":2}]`, "without \"ts\""},
		{`[{"name":"a","ph":"X","ts":1}]`, "without \"dur\""},
		{`[{"name":"a","ph":"X","ts":1,"dur":-3}]`, "negative dur"},
		{`[{"name":"a","ph":"X","ts":"1","dur":3}]`, `"ts" is not a number`},
		{`[{"name":"a","ph":"X","ts":1,"dur":3,"pid":1.5}]`, `"pid" is not an integer`},
		{`[{"name":"a","ph":"X","ts":1,"dur":3,"tid":"x"}]`, `"tid"`},
		{`[{"name":"a","ph":"i","ts":1,"s":"q"}]`, "instant scope"},
		{`[{"name":"a","ph":"X","ts":1,"dur":3,"args":[1]}]`, "args"},
		{`[{"name":"thread_name","ph":"M","args":{}}]`, "args.name"},
		{`[{"name":"colour","ph":"M","args":{}}]`, "unknown metadata"},
		{`[{"name":"a","ph":"E","ts":1}]`, "end without a begin"},
		{`[{"name":"a","ph":"B","ts":5},{"ph":"E","ts":1}]`, "before its begin"},
		{`[{"name":1,"ph":"X","ts":1,"dur":1}]`, `"name" is not a string`},
	} {
		_, err := Read(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want one containing %q", c.in, err, c.err)
		}
	}
	// The array form, with or without its closing bracket, and B/E pairs.
	for _, in := range []string{
		`[{"name":"a","ph":"B","ts":1,"pid":0,"tid":0},{"ph":"E","ts":2,"pid":0,"tid":0}]`,
		`[{"name":"a","ph":"X","ts":1,"dur":0,"pid":3,"tid":7},` + "\n",
		`[{"name":"a","ph":"X","ts":1,"dur":0,"pid":"3","tid":7,"id":5}`,
	} {
		if _, err := Read(strings.NewReader(in)); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
}

func TestMerge(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	var files [][]Event
	for r := range 4 {
		evs, err := Read(bytes.NewReader(rankFile(t, r, base.Add(time.Duration(3-r)*time.Microsecond))))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, evs)
	}
	// A fifth file claiming rank 1 again.
	dup, _ := Read(bytes.NewReader(rankFile(t, 1, base)))
	files = append(files, dup)
	out, renum := Merge(files)
	if renum != 1 {
		t.Errorf("%d files renumbered, want 1", renum)
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, e := range out {
		w.Write(e)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	back, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 5*11 {
		t.Fatalf("%d events after merging, want %d", len(back), 5*11)
	}
	seenMeta := true
	last := 0.0
	pids := map[int]int{}
	for _, e := range back {
		if e.Ph == "M" {
			if !seenMeta {
				t.Fatal("metadata after timed events")
			}
			continue
		}
		seenMeta = false
		if e.TS < last {
			t.Fatalf("ts %f after %f: not sorted", e.TS, last)
		}
		last = e.TS
		if e.Name == "AllReduce" {
			pids[e.PID]++
		}
	}
	// Every rank's collectives are there, the duplicate on a new process.
	if len(pids) != 5 || pids[0] != 3 || pids[4] != 3 {
		t.Errorf("AllReduce slices per pid: %v", pids)
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"traceEvents":[{"name":"a","ph":"X","ts":1,"dur":2,"pid":0,"tid":0,"args":{"k":1}}]}`))
	f.Add([]byte(`[{"name":"a","ph":"B","ts":1},{"ph":"E","ts":2}`))
	f.Add([]byte(`[{"name":"process_name","ph":"M","pid":1,"args":{"name":"rank 1"}}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		// What Read accepts, Write writes back into something Read accepts.
		var buf bytes.Buffer
		w := NewWriter(&buf)
		for _, e := range evs {
			if err := w.Write(e); err != nil {
				return // e.g. args JSON cannot encode (none expected)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		again, err := Read(&buf)
		if err != nil {
			t.Fatalf("rewritten file rejected: %v\n%s", err, buf.Bytes())
		}
		if len(again) != len(evs) {
			t.Fatalf("%d events, then %d", len(evs), len(again))
		}
		Merge([][]Event{evs, again})
	})
}
