//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/hcomm-go/hcomm/internal/topo"
)

var (
	hcommOnce sync.Once
	hcommBin  string
	hcommErr  error
)

// buildHcomm builds this command once for tests that launch it, beside
// the rank helper (TestMain removes both).
func buildHcomm(t *testing.T) string {
	hcommOnce.Do(func() {
		hcommBin = filepath.Join(filepath.Dir(helperBin), "hcomm")
		if out, err := exec.Command("go", "build", "-o", hcommBin, ".").CombinedOutput(); err != nil {
			hcommErr = err
			t.Logf("%s", out)
		}
	})
	if hcommErr != nil {
		t.Fatalf("build hcomm: %v", hcommErr)
	}
	return hcommBin
}

// TestTopoJob runs `hcomm run --hosts a:2,b:2 -- hcomm topo`: rank 0 prints
// the joined topology; a file contradicting the placement fails every rank.
func TestTopoJob(t *testing.T) {
	bin := buildHcomm(t)
	// A fake rsh that runs the remote command here: ranks on "hosts" a
	// and b share this machine but not their host identity.
	rsh := filepath.Join(t.TempDir(), "rsh")
	if err := os.WriteFile(rsh, []byte("#!/bin/sh\nshift\nexec sh -c \"$*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := launch(t, "--hosts", "a:2,b:2", "--rsh", rsh, "--store-addr", "127.0.0.1:0", "--bind-to", "none", "--", bin, "topo")
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"4 ranks on 2 hosts (from discovery)", "host a: ranks 0-1", "host b: ranks 2-3", "(2 host crossings", "rail 0: ranks 0 2", "hosts a, b share one kernel"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if n := strings.Count(stdout, "topology:"); n != 1 {
		t.Errorf("%d ranks printed the topology, want 1:\n%s", n, stdout)
	}

	// By default (auto) the ranks of hosts sharing a machine take their
	// shares of its CPUs at Init, and hcomm topo as a rank does too: on
	// 2 or 3 CPUs, ranks 0 and 2 get one CPU, and b's leader is rank 3;
	// on 4 or more each rank has CPUs of its own, the leaders 0 and 2.
	if cpus, err := topo.AllowedCPUs(); err == nil && len(cpus) >= 2 {
		code, stdout, stderr := launch(t, "--hosts", "a:2,b:2", "--rsh", rsh, "--store-addr", "127.0.0.1:0", "--", bin, "topo")
		if code != 0 {
			t.Fatalf("default binding: exit status %d; stderr:\n%s", code, stderr)
		}
		want := "rail 0: ranks 0 2"
		if len(cpus) < 4 {
			want = "rail 0: ranks 0 3"
		}
		if !strings.Contains(stdout, want) {
			t.Errorf("default binding on %d CPUs: output lacks %q:\n%s", len(cpus), want, stdout)
		}
	}

	// Bound one to a CPU (--bind-to core, which the ranks apply
	// themselves through the rsh), host b's rank 2 would share rank 0's
	// CPU: hcomm topo binds like a rank and shows rank 3 as b's leader.
	if cpus, err := topo.AllowedCPUs(); err == nil && len(cpus) >= 2 {
		code, stdout, stderr := launch(t, "--hosts", "a:2,b:2", "--rsh", rsh, "--store-addr", "127.0.0.1:0", "--bind-to", "core", "--", bin, "topo")
		if code != 0 {
			t.Fatalf("--bind-to core: exit status %d; stderr:\n%s", code, stderr)
		}
		for _, want := range []string{"rank 2: local 0, numa", "rail 0: ranks 0 3", "rail 1: ranks 1 2"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("--bind-to core: output lacks %q:\n%s", want, stdout)
			}
		}
	}

	file := filepath.Join(t.TempDir(), "wrong.topo")
	if err := os.WriteFile(file, []byte("host a ranks 0,2\nhost b ranks 1,3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = launch(t, "--hosts", "a:2,b:2", "--rsh", rsh, "--store-addr", "127.0.0.1:0", "--", bin, "topo", "-file", file)
	if code == 0 {
		t.Fatal("a contradicting file passed")
	}
	if want := "rank 2 is placed on host a but runs on b"; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}

// TestTopoLive: while a 2-rank job on two "hosts" (TCP between them) is
// running, `hcomm topo -live STORE` prints each rank's network paths with
// the bytes an AllReduce moved on them.
func TestTopoLive(t *testing.T) {
	bin := buildHcomm(t)
	rsh := filepath.Join(t.TempDir(), "rsh")
	if err := os.WriteFile(rsh, []byte("#!/bin/sh\nshift\nexec sh -c \"$*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Rank 1 waits in the barrier, its job still running, while rank 0
	// asks for the paths.
	code, stdout, stderr := launch(t, helperArgs(0, []string{"--hosts", "a:1,b:1", "--rsh", rsh, "--store-addr", "127.0.0.1:0"},
		"init", "bigallreduce", "rank0:topolive="+bin, "barrier")...)
	if code != 0 {
		t.Fatalf("exit status %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for r := range 2 {
		want := regexp.MustCompile(fmt.Sprintf(`(?m)^rank %d \(pid \d+\):\n  comm world rank %d:\n    peer %d path 0 \S+->\S+ up rate [0-9.]+ MB/s share [0-9.]+ sent [1-9]\d* received [1-9]\d* rtt`, r, r, 1-r))
		if !want.MatchString(stdout) {
			t.Errorf("no live path of rank %d to rank %d with bytes moved:\n%s", r, 1-r, stdout)
		}
	}
}
