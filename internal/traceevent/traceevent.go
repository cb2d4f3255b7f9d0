// Package traceevent writes, checks and merges trace-event files: the JSON
// format of Chrome's about:tracing that Perfetto (ui.perfetto.dev) and
// chrome://tracing open.
//
// A file is an object {"traceEvents": [...], "displayTimeUnit": "ns"}
// holding events. Every event has a phase "ph"; "ts" is in microseconds
// (fractions allowed) and, for complete events ("X"), "dur" too; "pid" and
// "tid" place it on a track: hcomm uses one process per rank (pid = rank,
// named "rank N") and one thread per stream of that rank (tid 0 is the
// communicator's own calls, named "collectives"). Metadata events ("M")
// name processes and threads. Timestamps are microseconds since the Unix
// epoch, so files written by the ranks of one job line up when merged.
package traceevent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"time"
)

// Event is one trace event. Fields a phase does not use are left out of
// the JSON.
type Event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	S    string         `json:"s,omitempty"` // scope of instant events: g, p or t
	ID   string         `json:"id,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// Micros returns t as trace-event microseconds since the Unix epoch.
func Micros(t time.Time) float64 { return float64(t.UnixNano()) / 1e3 }

// Writer streams events to a file. It is not safe for concurrent use.
type Writer struct {
	w      *bufio.Writer
	n      int
	err    error
	closer io.Closer
}

// NewWriter starts a file on w. Close finishes it (and closes w if it is
// an io.Closer).
func NewWriter(w io.Writer) *Writer {
	tw := &Writer{w: bufio.NewWriterSize(w, 64<<10)}
	if c, ok := w.(io.Closer); ok {
		tw.closer = c
	}
	_, tw.err = tw.w.WriteString(`{"displayTimeUnit":"ns","traceEvents":[`)
	return tw
}

// Write appends one event.
func (tw *Writer) Write(e Event) error {
	if tw.err != nil {
		return tw.err
	}
	b, err := json.Marshal(e)
	if err != nil {
		tw.err = fmt.Errorf("traceevent: %w", err)
		return tw.err
	}
	if tw.n > 0 {
		tw.w.WriteString(",\n")
	} else {
		tw.w.WriteString("\n")
	}
	_, tw.err = tw.w.Write(b)
	tw.n++
	return tw.err
}

// Process names process pid (a rank's track group) and sets its sort
// order.
func (tw *Writer) Process(pid int, name string) error {
	tw.Write(Event{Name: "process_name", Ph: "M", PID: pid, Args: map[string]any{"name": name}})
	return tw.Write(Event{Name: "process_sort_index", Ph: "M", PID: pid, Args: map[string]any{"sort_index": pid}})
}

// Thread names thread tid of process pid (a track).
func (tw *Writer) Thread(pid, tid int, name string) error {
	tw.Write(Event{Name: "thread_name", Ph: "M", PID: pid, TID: tid, Args: map[string]any{"name": name}})
	return tw.Write(Event{Name: "thread_sort_index", Ph: "M", PID: pid, TID: tid, Args: map[string]any{"sort_index": tid}})
}

// Slice writes a complete event: name on track (pid, tid) from start for
// dur.
func (tw *Writer) Slice(pid, tid int, name, cat string, start time.Time, dur time.Duration, args map[string]any) error {
	d := float64(dur.Nanoseconds()) / 1e3
	return tw.Write(Event{Name: name, Cat: cat, Ph: "X", TS: Micros(start), Dur: &d, PID: pid, TID: tid, Args: args})
}

// Instant writes an instant event on track (pid, tid).
func (tw *Writer) Instant(pid, tid int, name, cat string, at time.Time, args map[string]any) error {
	return tw.Write(Event{Name: name, Cat: cat, Ph: "i", S: "t", TS: Micros(at), PID: pid, TID: tid, Args: args})
}

// Close finishes the file and reports the first error of any write.
func (tw *Writer) Close() error {
	if tw.err == nil {
		_, tw.err = tw.w.WriteString("\n]}\n")
	}
	if tw.err == nil {
		tw.err = tw.w.Flush()
	}
	if tw.closer != nil {
		if err := tw.closer.Close(); tw.err == nil {
			tw.err = err
		}
		tw.closer = nil
	}
	return tw.err
}

// maxFile bounds a file Read accepts.
const maxFile = 1 << 30

// Read decodes a trace-event file in either form the format allows — an
// object with a traceEvents array, or a bare array — including an array
// whose closing bracket is missing (a writer that died), and checks every
// event (Check).
func Read(r io.Reader) ([]Event, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("traceevent: %w", err)
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("traceevent: file larger than %d bytes", maxFile)
	}
	raw, err := decode(b)
	if err != nil {
		return nil, err
	}
	evs := make([]Event, 0, len(raw))
	for i, m := range raw {
		e, err := check(m)
		if err != nil {
			return nil, fmt.Errorf("traceevent: event %d: %w", i, err)
		}
		evs = append(evs, e)
	}
	if err := checkNesting(evs); err != nil {
		return nil, err
	}
	return evs, nil
}

func decode(b []byte) ([]map[string]json.RawMessage, error) {
	var obj struct {
		TraceEvents *[]map[string]json.RawMessage `json:"traceEvents"`
	}
	var arr []map[string]json.RawMessage
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	if i == len(b) {
		return nil, errors.New("traceevent: empty file")
	}
	switch b[i] {
	case '{':
		if err := json.Unmarshal(b, &obj); err != nil {
			return nil, fmt.Errorf("traceevent: %w", err)
		}
		if obj.TraceEvents == nil {
			return nil, errors.New(`traceevent: object without a "traceEvents" array`)
		}
		return *obj.TraceEvents, nil
	case '[':
		err := json.Unmarshal(b, &arr)
		if err != nil {
			// The array form may lack its closing bracket.
			t := b[:len(b):len(b)]
			for len(t) > 0 && (t[len(t)-1] == ' ' || t[len(t)-1] == '\n' || t[len(t)-1] == '\r' || t[len(t)-1] == '\t' || t[len(t)-1] == ',') {
				t = t[:len(t)-1]
			}
			if err2 := json.Unmarshal(append(t, ']'), &arr); err2 != nil {
				return nil, fmt.Errorf("traceevent: %w", err)
			}
		}
		return arr, nil
	}
	return nil, fmt.Errorf("traceevent: file starts with %q, not an object or array", b[i])
}

// Phases the format defines (deprecated ones included, as viewers accept
// them).
var phases = map[string]bool{
	"B": true, "E": true, "X": true, "i": true, "I": true, "C": true,
	"b": true, "n": true, "e": true, "S": true, "T": true, "p": true, "F": true,
	"s": true, "t": true, "f": true, "P": true, "N": true, "O": true, "D": true,
	"M": true, "V": true, "v": true, "R": true, "c": true, "(": true, ")": true,
}

var metaNames = map[string]bool{"process_name": true, "process_labels": true, "process_sort_index": true,
	"thread_name": true, "thread_sort_index": true, "process_uptime_seconds": true, "num_cpus": true}

// check validates one event against the format: a known phase; a string
// name (required except on end events); ts a finite number of
// microseconds, required except on metadata; for "X" a non-negative dur;
// pid and tid integers; args an object; instant scope g, p or t; metadata
// with a known name and, for names, a string args.name.
func check(m map[string]json.RawMessage) (Event, error) {
	var e Event
	str := func(k string, dst *string) error {
		if v, ok := m[k]; ok {
			if err := json.Unmarshal(v, dst); err != nil {
				return fmt.Errorf("%q is not a string", k)
			}
		}
		return nil
	}
	num := func(k string) (float64, bool, error) {
		v, ok := m[k]
		if !ok {
			return 0, false, nil
		}
		var f float64
		if err := json.Unmarshal(v, &f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, true, fmt.Errorf("%q is not a number", k)
		}
		return f, true, nil
	}
	integer := func(k string) (int, error) {
		v, ok := m[k]
		if !ok {
			return 0, nil
		}
		var s string
		if json.Unmarshal(v, &s) == nil { // ids written as strings are allowed
			n, err := strconv.Atoi(s)
			if err != nil {
				return 0, fmt.Errorf("%q %q is not an integer", k, s)
			}
			return n, nil
		}
		f, _, err := num(k)
		if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, fmt.Errorf("%q is not an integer", k)
		}
		return int(f), nil
	}
	if _, ok := m["ph"]; !ok {
		return e, errors.New(`no "ph"`)
	}
	if err := str("ph", &e.Ph); err != nil {
		return e, err
	}
	if !phases[e.Ph] {
		return e, fmt.Errorf("unknown phase %q", e.Ph)
	}
	if err := str("name", &e.Name); err != nil {
		return e, err
	}
	if _, ok := m["name"]; !ok && e.Ph != "E" {
		return e, fmt.Errorf(`%q event without "name"`, e.Ph)
	}
	if err := str("cat", &e.Cat); err != nil {
		return e, err
	}
	if err := str("id", &e.ID); err != nil {
		// ids may be numbers too
		if f, _, err := num("id"); err == nil {
			e.ID = strconv.FormatFloat(f, 'f', -1, 64)
		} else {
			return e, errors.New(`"id" is neither a string nor a number`)
		}
	}
	ts, hasTS, err := num("ts")
	if err != nil {
		return e, err
	}
	if !hasTS && e.Ph != "M" {
		return e, fmt.Errorf(`%q event without "ts"`, e.Ph)
	}
	e.TS = ts
	if d, ok, err := num("dur"); err != nil {
		return e, err
	} else if ok {
		if d < 0 {
			return e, fmt.Errorf("negative dur %g", d)
		}
		e.Dur = &d
	} else if e.Ph == "X" {
		return e, errors.New(`"X" event without "dur"`)
	}
	if e.PID, err = integer("pid"); err != nil {
		return e, err
	}
	if e.TID, err = integer("tid"); err != nil {
		return e, err
	}
	if err := str("s", &e.S); err != nil {
		return e, err
	}
	if (e.Ph == "i" || e.Ph == "I") && e.S != "" && e.S != "g" && e.S != "p" && e.S != "t" {
		return e, fmt.Errorf("instant scope %q", e.S)
	}
	if v, ok := m["args"]; ok {
		if err := json.Unmarshal(v, &e.Args); err != nil {
			return e, errors.New(`"args" is not an object`)
		}
	}
	if e.Ph == "M" {
		if !metaNames[e.Name] {
			return e, fmt.Errorf("unknown metadata %q", e.Name)
		}
		if e.Name == "process_name" || e.Name == "thread_name" {
			if _, ok := e.Args["name"].(string); !ok {
				return e, fmt.Errorf("%s without a string args.name", e.Name)
			}
		}
	}
	return e, nil
}

// checkNesting checks that on every track, "B" and "E" events nest: an end
// closes an open begin, no earlier than it.
func checkNesting(evs []Event) error {
	type track struct{ pid, tid int }
	open := map[track][]float64{}
	for i, e := range evs {
		k := track{e.PID, e.TID}
		switch e.Ph {
		case "B":
			open[k] = append(open[k], e.TS)
		case "E":
			st := open[k]
			if len(st) == 0 {
				return fmt.Errorf("traceevent: event %d: end without a begin on pid %d tid %d", i, e.PID, e.TID)
			}
			if e.TS < st[len(st)-1] {
				return fmt.Errorf("traceevent: event %d: end at %g before its begin at %g", i, e.TS, st[len(st)-1])
			}
			open[k] = st[:len(st)-1]
		}
	}
	return nil
}

// Merge joins the events of several files into one list: metadata first,
// then every other event by time (stable, so a file's order of equal
// times is kept). Files whose process ids collide with an earlier file's
// (two files both claiming rank 0) get their processes renumbered past the
// highest id seen; renumbered reports how many files were.
func Merge(files [][]Event) (out []Event, renumbered int) {
	used := map[int]bool{}
	next := 0
	for _, evs := range files {
		for _, e := range evs {
			next = max(next, e.PID+1)
		}
	}
	for _, evs := range files {
		pids := map[int]bool{}
		for _, e := range evs {
			pids[e.PID] = true
		}
		clash := false
		for p := range pids {
			if used[p] {
				clash = true
			}
		}
		remap := map[int]int{}
		if clash {
			renumbered++
			keys := make([]int, 0, len(pids))
			for p := range pids {
				keys = append(keys, p)
			}
			sort.Ints(keys)
			for _, p := range keys {
				remap[p] = next
				next++
			}
		}
		for _, e := range evs {
			if np, ok := remap[e.PID]; ok {
				e.PID = np
				if e.Name == "process_sort_index" {
					e.Args = map[string]any{"sort_index": np}
				}
			}
			used[e.PID] = true
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		mi, mj := out[i].Ph == "M", out[j].Ph == "M"
		if mi != mj {
			return mi
		}
		if mi {
			return false
		}
		return out[i].TS < out[j].TS
	})
	return out, renumbered
}
