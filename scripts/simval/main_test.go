package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestTCPValidation runs the validation on the TCP runs kept in testdata
// (measure_tcp.sh, 400 Mbit/s tbf links between namespaces, 2–8 ranks):
// the link's rate is not fitted, α is fitted on the 2-rank runs only, and
// the bandwidth-bound points (≥ 512 KiB) of the 4- and 8-rank runs must be
// predicted within 25% — the simulator's model of shaped links checked
// against measurements it was not fitted to.
func TestTCPValidation(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-tcp", "testdata/tcp-400mbit"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	m := regexp.MustCompile(`validation, ≥ 512 KiB:\s+(\d+) of\s+(\d+) points`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no summary in\n%s", s)
	}
	within, total := atoi(t, m[1]), atoi(t, m[2])
	if total < 20 || within < total*9/10 {
		t.Errorf("bandwidth-bound validation points: %d of %d within 25%%\n%s", within, total, s)
	}
	if !strings.Contains(s, "payload 47.82 MB/s (not fitted)") {
		t.Errorf("link rate not derived from the tbf rate:\n%s", s)
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, " n=2 ") && !strings.HasSuffix(line, " fit") {
			t.Errorf("a 2-rank point outside the fitting set: %s", line)
		}
		if (strings.Contains(line, " n=4 ") || strings.Contains(line, " n=8 ")) && !strings.HasSuffix(line, "validate") {
			t.Errorf("a 4- or 8-rank point in the fitting set: %s", line)
		}
	}
}

// TestSHMValidationRuns checks that the shared-memory validation runs on
// the kept runs with given parameters and keeps fitting and validating
// sets apart (its figures under load are BENCHMARKS.md's, not asserted).
func TestSHMValidationRuns(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-params", "25e-6,0.4e-9,0.2e-9,0.3", "-md", "testdata/shm"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "validation set:") || !strings.Contains(s, "| allreduce | ring | 8 |") {
		t.Errorf("output:\n%s", s)
	}
	if strings.Contains(s, "| allreduce | ring | 2 |") {
		t.Error("a fitting point in the validation table")
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{dir},                          // no measurements
		{"-tcp", dir},                  // no rate
		{"-tcp", "-rate", "fast", dir}, // bad rate
		{"-fit", "x", dir},
		{},
	} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if v, err := parseRate("400mbit"); err != nil || v != 400e6 {
		t.Errorf("400mbit: %g %v", v, err)
	}
}

func atoi(t *testing.T, s string) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
