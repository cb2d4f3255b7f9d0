package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
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

// TestFileStoreRefusesForeignDirectory checks that a directory, or a value
// file, that another user owns or may write is refused rather than trusted.
func TestFileStoreRefusesForeignDirectory(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("ownership checks are Unix only")
	}
	parent := t.TempDir()
	mkdir := func(name string, mode os.FileMode) string {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct {
		name string
		mode os.FileMode
		ok   bool
	}{
		{"private", 0o700, true},
		{"readable", 0o755, true},
		{"world-writable", 0o777, false},
		{"group-writable", 0o770, false},
		{"sticky-tmp", 0o1777, false},
		{"others-writable", 0o703, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := mkdir(tc.name, tc.mode)
			s, err := NewFileStore(dir)
			if tc.ok {
				if err != nil {
					t.Fatalf("NewFileStore of a %04o directory: %v", tc.mode, err)
				}
				s.Close()
				return
			}
			if !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "writable by group or others") {
				t.Fatalf("NewFileStore of a %04o directory: err = %v, want ErrNotPrivate", tc.mode, err)
			}
		})
	}

	t.Run("other-owner", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to give a directory to another user")
		}
		dir := mkdir("foreign", 0o700)
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		_, err := NewFileStore(dir)
		if !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Fatalf("NewFileStore of another user's directory: err = %v, want ErrNotPrivate", err)
		}
	})

	t.Run("planted-entries", func(t *testing.T) {
		dir := mkdir("entries", 0o700)
		s, err := NewFileStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := testCtx(t)
		if err := s.Set(ctx, "card/0", []byte("10.0.0.1:1")); err != nil {
			t.Fatal(err)
		}
		if err := s.Set(ctx, "n", []byte("1")); err != nil {
			t.Fatal(err)
		}
		// A value left writable by others (as if planted while the
		// directory was open) is refused.
		if err := os.Chmod(s.path("card/0"), 0o666); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "card/0"); !errors.Is(err, ErrNotPrivate) {
			t.Errorf("Get of a world-writable value: err = %v, want ErrNotPrivate", err)
		}
		if os.Geteuid() == 0 {
			if err := os.Chown(s.path("n"), 65534, 65534); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Add(ctx, "n", 1); !errors.Is(err, ErrNotPrivate) {
				t.Errorf("Add to another user's value: err = %v, want ErrNotPrivate", err)
			}
		}
	})
}
