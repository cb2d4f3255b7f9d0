//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/traceevent"
)

// TestRunMergesTrace: a job run with HCOMM_TRACE leaves one merged file
// with every rank's collectives.
func TestRunMergesTrace(t *testing.T) {
	dir := t.TempDir()
	pattern := filepath.Join(dir, "job.json")
	code, _, stderr := launch(t, helperArgs(3, []string{"-x", "HCOMM_TRACE=" + pattern},
		"init", "allreduce", "barrier", "allreduce", "close")...)
	if code != 0 {
		t.Fatalf("status %d:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "hcomm run: trace: 3 rank file(s) merged into "+pattern) {
		t.Errorf("no merge line:\n%s", stderr)
	}
	evs, err := readTrace(pattern)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[int][]string{}
	for _, e := range evs {
		if e.Ph == "X" && e.Cat == "collective" {
			ops[e.PID] = append(ops[e.PID], e.Name)
		}
	}
	for r := range 3 {
		if got := strings.Join(ops[r], ","); got != "AllReduce,Barrier,AllReduce" {
			t.Errorf("rank %d's collectives in the merged file: %q", r, got)
		}
	}
}

// TestMergeTraceLeavesOut: files the launcher cannot read are named, the
// others merged.
func TestMergeTraceLeavesOut(t *testing.T) {
	dir := t.TempDir()
	pattern := filepath.Join(dir, "t%r.json")
	w := traceevent.NewWriter(mustCreate(t, filepath.Join(dir, "t0.json")))
	w.Process(0, "rank 0")
	w.Slice(0, 0, "AllReduce", "collective", time.Unix(1, 0), time.Millisecond, nil)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "t1.json"), []byte(`{"traceEvents":[{"ph":"X"`), 0o600); err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	j := &job{cfg: &runConfig{env: []string{"HCOMM_TRACE=" + pattern}}, places: make([]placement, 3), stderr: &syncWriter{w: &errOut}}
	j.mergeTrace()
	log := errOut.String()
	for _, want := range []string{"trace: left out rank 1 (", "trace: left out rank 2 (no such file)",
		"trace: 1 rank file(s) merged into " + filepath.Join(dir, "tall.json")} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	evs, err := readTrace(filepath.Join(dir, "tall.json"))
	slices := 0
	for _, e := range evs {
		if e.Ph == "X" && e.Name == "AllReduce" {
			slices++
		}
	}
	if err != nil || slices != 1 {
		t.Errorf("merged file: %d slices of %d events, %v", slices, len(evs), err)
	}
}

func mustCreate(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
