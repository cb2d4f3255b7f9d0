package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestLapCalls(t *testing.T) {
	for _, tc := range []struct {
		iters int64
		est   float64
		nlaps int
		want  int64
		lap   time.Duration // 0: lapMin
	}{
		{20000, 0.2e-6, maxLaps, 10, 0},              // short calls: laps of about lapMin
		{20000, 0.5e-6, maxLaps, 4, 0},               // rounded to the nearest
		{20000, 3e-6, maxLaps, 1, 0},                 // longer calls: each timed
		{100, 1, maxLaps, 1, 0},                      // long calls
		{20000, 0, maxLaps, 1, 0},                    // no estimate
		{50000, 1e-3, maxLaps, 3, 0},                 // more calls than laps: k grows to fit
		{40000, 1e-3, maxLaps, 2, 0},                 // exactly
		{5, 0.1e-6, maxLaps, 5, 0},                   // fewer calls than a lap: one lap
		{3, 1e-9, maxLaps, 3, 0},                     // the shortest loop
		{7, 1e-3, 2, 4, 0},                           // small buffers
		{1, 1e-3, 0, 1, 0},                           // no buffer: still a valid k
		{20000, 0.05e-6, maxLaps, 40, 0},             // very short calls
		{maxTimedIters, 2e-6, 100, 200, 0},           // fits the buffer
		{20000, 0.2e-6, maxLaps, 1, time.Nanosecond}, // -lap 1ns: every call alone
		{20000, 0.2e-6, maxLaps, 50, 10 * time.Microsecond},
		{50000, 0.2e-6, maxLaps, 3, time.Nanosecond}, // still fits the buffer
	} {
		lap := tc.lap
		if lap == 0 {
			lap = lapMin
		}
		got := lapCalls(tc.iters, tc.est, lap, tc.nlaps)
		if got != tc.want {
			t.Errorf("lapCalls(%d, %g, %v, %d) = %d, want %d", tc.iters, tc.est, lap, tc.nlaps, got, tc.want)
		}
		if tc.nlaps > 0 && tc.iters/got > int64(tc.nlaps) {
			t.Errorf("lapCalls(%d, %g, %d) = %d: %d laps overflow the buffer", tc.iters, tc.est, tc.nlaps, got, tc.iters/got)
		}
	}
}

// -lap sets the median's lap; it defaults to lapMin and 0 times every
// call alone.
func TestLapFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, lapMin},
		{[]string{"-lap", "0"}, 0},
		{[]string{"-lap", "10us"}, 10 * time.Microsecond},
		{[]string{"-lap", "0.000005"}, 5 * time.Microsecond},
	} {
		pc, err := parsePerfFlags(tc.args, io.Discard)
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
		} else if pc.lap != tc.want {
			t.Errorf("%v: lap %v, want %v", tc.args, pc.lap, tc.want)
		}
	}
	if _, err := parsePerfFlags([]string{"-lap", "-1us"}, io.Discard); err == nil {
		t.Error("-lap -1us accepted")
	}
	if k := lapCalls(20000, 0.2e-6, 0, maxLaps); k != 1 {
		t.Errorf("-lap 0: laps of %d calls, want 1", k)
	}
}

func TestMedianOf(t *testing.T) {
	us := time.Microsecond
	for _, tc := range []struct {
		name string
		laps []time.Duration
		k    int64
		want time.Duration
	}{
		{"none", nil, 1, 0},
		{"one", []time.Duration{3 * us}, 1, 3 * us},
		{"odd", []time.Duration{5 * us, 1 * us, 3 * us}, 1, 3 * us},
		{"even", []time.Duration{4 * us, 1 * us, 2 * us, 8 * us}, 1, 3 * us},
		// Calls that lost their CPU: the mean is 1000.8 µs, the median
		// stays on the calls that had one.
		{"outliers", []time.Duration{2 * us, 2 * us, 5000 * us, 2 * us, 1 * us}, 1, 2 * us},
		{"laps", []time.Duration{20 * us, 22 * us, 9000 * us}, 10, 2200 * time.Nanosecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := medianOf(tc.laps, tc.k); got != tc.want {
				t.Errorf("medianOf(%v, %d) = %v, want %v", tc.laps, tc.k, got, tc.want)
			}
		})
	}
}

func TestTimedLoop(t *testing.T) {
	calls := 0
	run := func(context.Context) error { calls++; return nil }
	laps := make([]time.Duration, 8)
	total, n, err := timedLoop(context.Background(), run, 23, 3, laps)
	if err != nil || calls != 23 || n != 7 {
		t.Fatalf("23 calls in laps of 3: %d calls, %d laps, err %v; want 23 calls, 7 laps", calls, n, err)
	}
	var sum time.Duration
	for _, l := range laps[:n] {
		if l < 0 {
			t.Errorf("negative lap %v", l)
		}
		sum += l
	}
	if sum > total {
		t.Errorf("laps sum to %v, more than the loop's %v", sum, total)
	}
	// An error ends the loop and is returned.
	boom := errors.New("boom")
	calls = 0
	fail := func(context.Context) error {
		if calls++; calls == 5 {
			return boom
		}
		return nil
	}
	if _, _, err := timedLoop(context.Background(), fail, 100, 1, make([]time.Duration, 100)); !errors.Is(err, boom) || calls != 5 {
		t.Errorf("error at call 5: %d calls, err %v", calls, err)
	}
}

// The measured path: the loop and its laps allocate nothing beside the
// call (which here allocates nothing either).
func TestTimedLoopAllocs(t *testing.T) {
	ctx := context.Background()
	run := func(context.Context) error { return nil }
	laps := make([]time.Duration, 1000)
	if a := testing.AllocsPerRun(10, func() {
		if _, _, err := timedLoop(ctx, run, 1000, 1, laps); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("timedLoop allocates %v times per loop, want 0", a)
	}
}

func TestRankCPUs(t *testing.T) {
	const h1, h2 = 11, 22
	for _, tc := range []struct {
		name    string
		all     []int64 // host, CPU at the start, CPU at the end, per rank
		ncpu    int
		cpus    []int
		stacked bool
	}{
		{"apart", []int64{h1, 0, 0, h1, 1, 1}, 2, []int{0, 1}, false},
		{"swapped", []int64{h1, 0, 1, h1, 1, 0}, 2, []int{1, 0}, false},
		{"at the start", []int64{h1, 1, 0, h1, 1, 1}, 2, []int{0, 1}, true},
		{"at the end", []int64{h1, 0, 1, h1, 1, 1}, 2, []int{1, 1}, true},
		{"two hosts", []int64{h1, 0, 0, h2, 0, 0}, 2, []int{0, 0}, false},
		{"more ranks than CPUs", []int64{h1, 0, 0, h1, 1, 1, h1, 1, 1, h1, 0, 0}, 2, []int{0, 1, 1, 0}, false},
		{"unknown", []int64{h1, -1, -1, h1, -1, -1}, 2, []int{-1, -1}, false},
		{"three of four", []int64{h1, 0, 0, h1, 2, 2, h1, 2, 3}, 4, []int{0, 2, 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpus, stacked := rankCPUs(tc.all, tc.ncpu)
			if stacked != tc.stacked || !equalInts(cpus, tc.cpus) {
				t.Errorf("rankCPUs(%v, %d) = %v, %v; want %v, %v", tc.all, tc.ncpu, cpus, stacked, tc.cpus, tc.stacked)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A point whose ranks shared a CPU is flagged: a comment line after the
// row in a text table, a line on stderr beside CSV rows (which keep the
// harness's seven fields).
func TestReportStacked(t *testing.T) {
	r := row{Impl: "x", Op: "allreduce", Ranks: 2, Bytes: 8, Count: 2, Type: "float32", Redop: "sum",
		Iters: 100, Usec: 20.5, MedUsec: 0.25, CPUs: []int{1, 1}, Stacked: true}
	for _, format := range []string{"text", "csv", "json"} {
		t.Run(format, func(t *testing.T) {
			pc := &perfConfig{format: format, modes: []bool{false}, algos: []string{""}}
			var out, errOut bytes.Buffer
			rp := newReporter(pc, 2, "test", &out, &errOut)
			rp.add(r)
			ok := r
			ok.Stacked, ok.CPUs = false, []int{0, 1}
			rp.add(ok)
			if err := rp.close(); err != nil {
				t.Fatal(err)
			}
			w, other := &out, &errOut
			if format != "text" {
				w, other = &errOut, &out
			}
			if got := strings.Count(w.String(), "# WARN "); got != 1 {
				t.Errorf("%d warnings, want 1:\n%s", got, w.String())
			}
			if !strings.Contains(w.String(), "# WARN allreduce 8 B: ranks of one host shared a CPU") ||
				!strings.Contains(w.String(), "at its end: 1,1)") {
				t.Errorf("warning does not name the point and the CPUs:\n%s", w.String())
			}
			if strings.Contains(other.String(), "WARN") {
				t.Errorf("warning in the wrong stream:\n%s", other.String())
			}
			if format == "text" {
				return // text tables are for people; readRows takes CSV and JSON
			}
			rows, err := readRows(&out)
			if err != nil || len(rows) != 2 {
				t.Fatalf("the rows do not read back (%v): %d", err, len(rows))
			}
			if format == "json" && (!rows[0].Stacked || rows[0].MedUsec != 0.25 || !equalInts(rows[0].CPUs, []int{1, 1})) {
				t.Errorf("JSON row lost the median or CPUs: %+v", rows[0])
			}
		})
	}
}
