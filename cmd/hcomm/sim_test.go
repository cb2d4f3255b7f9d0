package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestSimCmd(t *testing.T) {
	var out, errb bytes.Buffer
	if err := simCmd([]string{"-n", "64", "-b", "1K", "-e", "1M", "-f", "32"}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	s := out.String()
	for _, want := range []string{"AllReduce", "64 ranks: 8 host(s) × 8 ranks", "ring", "rd", "hd", "dbtree", "hring", "hier", "fastest:", "critical path", "chunks"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	// 1K, 32K, 1M: three sizes of eight algorithms (four flat, four
	// host-aware: the ranks span 8 hosts).
	if rows := strings.Count(s, "ends on rank"); rows != 24 {
		t.Errorf("%d rows, want 24:\n%s", rows, s)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "topo.json")
	if err := os.WriteFile(file, []byte(`{"ranks_per_host": 2, "hosts_per_rack": 2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := simCmd([]string{"-n", "16", "-op", "allgather", "-algo", "ring", "-b", "64K", "-topo", file}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "16 ranks: 8 host(s) × 2 ranks, 4 rack(s)") || strings.Contains(s, "bruck") || !strings.Contains(s, "rack") {
		t.Errorf("topology file not used:\n%s", s)
	}
}

// TestSimCmdSlots: on one host, a small collective also gets the group
// call's row (the library runs it that way), a large one does not, nor
// does a run forced to algorithms.
func TestSimCmdSlots(t *testing.T) {
	for _, c := range []struct {
		args []string
		rows int
	}{
		{[]string{"-n", "4", "-topo", "local", "-b", "8", "-e", "64K", "-f", "8192"}, 1},
		{[]string{"-n", "4", "-topo", "local", "-op", "barrier"}, 1},
		{[]string{"-n", "4", "-topo", "local", "-b", "8", "-algo", "ring"}, 0},
		{[]string{"-n", "64", "-b", "8"}, 0}, // 8 hosts
	} {
		var out, errb bytes.Buffer
		if err := simCmd(c.args, &out, &errb); err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, errb.String())
		}
		s := out.String()
		if got := strings.Count(s, "runs as: shm-slots"); got != c.rows || strings.Count(s, "shm-slots") != 2*c.rows {
			t.Errorf("%v: %d group-call rows, want %d:\n%s", c.args, got, c.rows, s)
		}
	}
}

func TestSimCmdErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"nic_bw": -1}`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "0"}, "at least 1 rank"},
		{[]string{"-op", "allfoo"}, "unknown collective"},
		{[]string{"-algo", "ring,nope"}, `no AllReduce algorithm "nope"`},
		{[]string{"-b", "1M", "-e", "1K"}, "below -b"},
		{[]string{"-b", "lots"}, "bad size"},
		{[]string{"-f", "1"}, "at least 2"},
		{[]string{"-topo", "/nonexistent.json"}, "no such file"},
		{[]string{"-topo", bad}, "nic_bw"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		var out, errb bytes.Buffer
		err := simCmd(c.args, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}

func TestSimTrace(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ring.json")
	var out, errb bytes.Buffer
	if err := simCmd([]string{"-n", "4", "-algo", "ring", "-b", "1M", "-trace", file}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := traceCmd([]string{"check", file}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	// 4 ranks × 2(n−1) = 6 steps of ring AllReduce: 24 slices on 4 tracks.
	if !strings.Contains(out.String(), "24 slices, 4 processes, 4 tracks") {
		t.Errorf("check: %s", out.String())
	}
	if err := simCmd([]string{"-n", "4", "-b", "1M", "-trace", file}, &out, &errb); err == nil || !strings.Contains(err.Error(), "one algorithm") {
		t.Errorf("-trace with every algorithm: %v", err)
	}
}

// TestSimUnfused: -unfused predicts the executor without its shared-memory
// fusions. A 2-rank ring AllReduce of 16 MiB on one host fuses its two
// steps into one exchange (one slice a rank in the trace, and a shorter
// time); with -unfused it runs them apart.
func TestSimUnfused(t *testing.T) {
	timeOf := func(args ...string) (float64, string) {
		t.Helper()
		var out, errb bytes.Buffer
		if err := simCmd(append([]string{"-n", "2", "-topo", "local", "-algo", "ring", "-b", "16M"}, args...), &out, &errb); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errb.String())
		}
		for _, l := range strings.Split(out.String(), "\n") {
			f := strings.Fields(l)
			if len(f) > 3 && f[1] == "ring" {
				v, err := strconv.ParseFloat(f[2], 64)
				if err != nil {
					t.Fatalf("%q: %v", l, err)
				}
				return v, out.String()
			}
		}
		t.Fatalf("%v: no ring row:\n%s", args, out.String())
		return 0, ""
	}
	fused, s := timeOf()
	if strings.Contains(s, "-unfused") {
		t.Errorf("header says -unfused without it:\n%s", s)
	}
	unfused, s := timeOf("-unfused")
	if !strings.Contains(s, "# -unfused") {
		t.Errorf("header does not say -unfused:\n%s", s)
	}
	if !(unfused > fused*1.02) {
		t.Errorf("ring 16 MiB on 2 ranks: %.1f µs unfused, %.1f fused; want the fused exchange faster", unfused, fused)
	}
	for _, c := range []struct {
		args   []string
		slices string
	}{{nil, "2 slices"}, {[]string{"-unfused"}, "4 slices"}} {
		file := filepath.Join(t.TempDir(), "ring.json")
		var out, errb bytes.Buffer
		if err := simCmd(append([]string{"-n", "2", "-topo", "local", "-algo", "ring", "-b", "16M", "-trace", file}, c.args...), &out, &errb); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		if err := traceCmd([]string{"check", file}, &out, &errb); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), c.slices+", 2 processes") {
			t.Errorf("%v: trace check %q, want %s", c.args, out.String(), c.slices)
		}
	}
}
