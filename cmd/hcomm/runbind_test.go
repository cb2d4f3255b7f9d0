//go:build linux

package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hcomm-go/hcomm/internal/topo"
)

var (
	cpusRE    = regexp.MustCompile(`(?m)^\[(\d+)\] cpus=(\S+)$`)
	threadsRE = regexp.MustCompile(`(?m)^\[(\d+)\] threads=(\S+)$`)
)

// byRank collects "[rank] key=value" lines.
func byRank(t *testing.T, re *regexp.Regexp, out string, n int) []string {
	t.Helper()
	got := make([]string, n)
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		var r int
		fmt.Sscan(m[1], &r)
		if r < n {
			got[r] = m[2]
		}
	}
	return got
}

// TestBindTo starts ranks with --bind-to and reads each one's
// Cpus_allowed_list from /proc/self/status.
func TestBindTo(t *testing.T) {
	allowed, err := topo.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	m, err := topo.Probe(topo.System())
	if err != nil {
		t.Fatal(err)
	}
	policies := []string{"core", "numa", "none"}
	if len(allowed) < 2 {
		// Two ranks on one CPU: bound only when overloading is allowed.
		policies = []string{"core:" + topo.Overload, "numa:" + topo.Overload, "none"}
	}
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			code, stdout, stderr := launch(t, helperArgs(2, []string{"--tag-output", "--bind-to", policy}, "cpus")...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			got := byRank(t, cpusRE, stdout, 2)
			for r := range 2 {
				want, _ := topo.Bind(policy, m, allowed, r, 2)
				if want == nil {
					want = allowed
				}
				if got[r] != topo.FormatCPUList(want) {
					t.Errorf("rank %d runs on CPUs %q, want %q", r, got[r], topo.FormatCPUList(want))
				}
			}
		})
	}
	code, _, stderr := launch(t, helperArgs(2, []string{"--bind-to", "socket"}, "cpus")...)
	if code == 0 || !strings.Contains(stderr, "want auto, none, core or numa") {
		t.Errorf("--bind-to socket: exit %d, %q", code, stderr)
	}
	// More local ranks than CPUs: refused before any rank starts, as
	// mpirun refuses, with the way to bind them anyway.
	n := len(allowed) + 1
	code, stdout, stderr := launch(t, helperArgs(n, []string{"--bind-to", "core"}, "cpus")...)
	if code == 0 || !strings.Contains(stderr, "core:"+topo.Overload) || cpusRE.MatchString(stdout) {
		t.Errorf("--bind-to core, %d ranks on %d CPUs: exit %d, stdout %q, stderr %q", n, len(allowed), code, stdout, stderr)
	}
}

// TestPollAffinity checks where a rank's threads may run after a
// collective: pinned polling workers under HCOMM_CPU_AFFINITY, and no
// thread restricted in an unbound job (auto costs nothing).
func TestPollAffinity(t *testing.T) {
	allowed, err := topo.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	all := topo.FormatCPUList(allowed)
	last := fmt.Sprint(allowed[len(allowed)-1])
	tests := []struct {
		name  string
		flags []string
		want  func(r int) []string // the threads' distinct lists
	}{
		{"unbound auto", nil, func(int) []string { return []string{all} }},
		{"explicit list", []string{"-x", "HCOMM_CPU_AFFINITY=" + last}, func(int) []string {
			if last == all {
				return []string{all}
			}
			return slices.Sorted(slices.Values([]string{all, last}))
		}},
		{"off", []string{"-x", "HCOMM_CPU_AFFINITY=off"}, func(int) []string { return []string{all} }},
		{"bound core", []string{"--bind-to", "core:" + topo.Overload}, func(r int) []string {
			return []string{fmt.Sprint(allowed[r%len(allowed)])}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flags := append([]string{"--tag-output"}, tt.flags...)
			code, stdout, stderr := launch(t, helperArgs(2, flags, "init", "bigallreduce", "threads")...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			got := byRank(t, threadsRE, stdout, 2)
			for r := range 2 {
				if want := strings.Join(tt.want(r), ";"); got[r] != want {
					t.Errorf("rank %d: threads run on %q, want %q", r, got[r], want)
				}
			}
		})
	}
	code, _, stderr := launch(t, helperArgs(1, []string{"-x", "HCOMM_CPU_AFFINITY=9999"}, "init")...)
	if code == 0 || !strings.Contains(stderr, "HCOMM_CPU_AFFINITY") {
		t.Errorf("HCOMM_CPU_AFFINITY outside the rank's CPUs: exit %d, %q", code, stderr)
	}
}
