//go:build unix

package shmdir

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestSweepStale: only old files of this prefix whose creator is gone go.
func TestSweepStale(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := strconv.Itoa(cmd.Process.Pid) // reaped: no such process
	live := strconv.Itoa(os.Getpid())
	old := time.Now().Add(-time.Minute)
	files := map[string]time.Time{
		"seg-" + dead + "-a":   old,        // removed
		"seg-" + dead + "-b":   time.Now(), // too young
		"seg-" + live + "-c":   old,        // creator alive
		"other-" + dead + "-d": old,        // another prefix
		"seg-x-e":              old,        // no pid
	}
	for name, mt := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	var gone []string
	SweepStale(dir, "seg-", 10*time.Second, func(name string, pid int) {
		if strconv.Itoa(pid) != dead {
			t.Errorf("removed %s with pid %d", name, pid)
		}
		gone = append(gone, name)
	})
	if len(gone) != 1 || gone[0] != "seg-"+dead+"-a" {
		t.Fatalf("removed %v, want only seg-%s-a", gone, dead)
	}
	for name := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if want := name != "seg-"+dead+"-a"; (err == nil) != want {
			t.Errorf("%s present = %v, want %v", name, err == nil, want)
		}
	}
}
