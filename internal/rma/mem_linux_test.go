package rma

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSweepStale(t *testing.T) {
	dir := t.TempDir()
	old := shmDir
	shmDir = dir
	defer func() { shmDir = old }()
	// A pid that cannot exist (above the kernel's limit) and one that does.
	dead := filepath.Join(dir, segPrefix+"4194305-00000000000000aa")
	live := filepath.Join(dir, fmt.Sprintf("%s%d-00000000000000bb", segPrefix, os.Getpid()))
	for _, p := range []string{dead, live} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		past := time.Now().Add(-time.Minute)
		os.Chtimes(p, past, past)
	}
	s, err := createSegment(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	s.unlink()
	s.unmap()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the segment of a dead process is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the segment of a live process was removed: %v", err)
	}
}
