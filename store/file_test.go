package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileStoreLayout checks that every key, however hostile, becomes one
// file inside the directory, and that no temporary files are left behind.
func TestFileStoreLayout(t *testing.T) {
	checkNoLeaks(t)
	parent := t.TempDir()
	dir := filepath.Join(parent, "store")
	s, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Dir() != dir {
		t.Errorf("Dir() = %q, want %q", s.Dir(), dir)
	}
	ctx := context.Background()
	keys := []string{"../x", "../../escape", "/etc/passwd", "a/../../b", ".lock", ".tmp-1", "C:\\win", "A", "a", strings.Repeat("é", 200)}
	for _, k := range keys {
		if err := s.Set(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Add(ctx, "n", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "A"); err != nil {
		t.Fatal(err)
	}

	outside, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(outside) != 1 || outside[0].Name() != "store" {
		t.Errorf("files appeared beside the store directory: %v", outside)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var values int
	for _, e := range entries {
		switch name := e.Name(); {
		case name == lockFileName:
		case strings.HasPrefix(name, tempPrefix):
			t.Errorf("temporary file %s left behind", name)
		case e.IsDir():
			t.Errorf("unexpected directory %s", name)
		case name[0] == 'k' || name[0] == 'h':
			values++
		default:
			t.Errorf("unexpected file %s", name)
		}
	}
	if want := len(keys) + 1 - 1; values != want { // + "n" - "A"
		t.Errorf("%d value files, want %d", values, want)
	}
	if v, err := s.Get(ctx, "a"); err != nil || string(v) != "a" {
		t.Errorf("Get(a) after Delete(A) = %q, %v", v, err)
	}
}

func TestNewFileStoreErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"", file, filepath.Join(file, "sub")} {
		if _, err := NewFileStore(dir); err == nil {
			t.Errorf("NewFileStore(%q) succeeded", dir)
		}
	}
}
