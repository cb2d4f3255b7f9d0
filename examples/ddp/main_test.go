package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func small(local int) config {
	return config{local: local, steps: 6, samples: 250, inputs: 16, hidden: 32, layers: 2,
		classes: 4, lr: 0.5, threshold: 4 << 10, seed: 3, tol: 1e-9}
}

// In-process ranks, including uneven shards, reach the single-process
// loss with overlap on and off.
func TestTrainLocal(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		var out bytes.Buffer
		if err := run(context.Background(), small(n), &out); err != nil {
			t.Fatalf("%d ranks: %v\n%s", n, err, out.String())
		}
		if !strings.Contains(out.String(), "final loss matches the single-process run") {
			t.Fatalf("%d ranks: unexpected report:\n%s", n, out.String())
		}
		if !regexp.MustCompile(`step time: overlap on \S+, off \S+`).MatchString(out.String()) {
			t.Fatalf("%d ranks: no step times in the report:\n%s", n, out.String())
		}
	}
}

// The loss check is real: with a tolerance nothing can meet, run fails.
func TestLossCheckFails(t *testing.T) {
	cfg := small(2)
	cfg.tol = -1 // no difference is within a negative tolerance
	var out bytes.Buffer
	err := run(context.Background(), cfg, &out)
	if err == nil || !strings.Contains(err.Error(), "differs from the single process") {
		t.Fatalf("run with a negative tolerance: %v, want a loss mismatch", err)
	}
}

func TestConfigCheck(t *testing.T) {
	for _, mod := range []func(*config){
		func(c *config) { c.local = -1 },
		func(c *config) { c.steps = 0 },
		func(c *config) { c.classes = 1 },
		func(c *config) { c.threshold = 0 },
	} {
		cfg := small(1)
		mod(&cfg)
		if cfg.check() == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
	if err := small(1).check(); err != nil {
		t.Fatal(err)
	}
}

// The program as a job of two processes started by the launcher.
func TestTrainUnderLauncher(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the program and the launcher")
	}
	dir := t.TempDir()
	ddp, launcher := filepath.Join(dir, "ddp"), filepath.Join(dir, "hcomm")
	for _, b := range [][]string{{"-o", ddp, "."}, {"-o", launcher, "../../cmd/hcomm"}} {
		cmd := exec.Command("go", append([]string{"build"}, b...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", b, err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, launcher, "run", "-n", "2", "--", ddp,
		"-steps", "6", "-samples", "250", "-inputs", "16", "-hidden", "32", "-layers", "2", "-classes", "4", "-threshold", "4096")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hcomm run: %v\n%s", err, out)
	}
	for _, want := range []string{"ddp: 2 ranks", "final loss matches the single-process run"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}
