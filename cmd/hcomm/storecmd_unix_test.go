//go:build unix

package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStoreEnvFile checks that --env-file holds the store's variables in a
// file only its owner can read, whatever the umask and an existing file's
// mode, prints nothing on standard output, and is removed at the end.
func TestStoreEnvFile(t *testing.T) {
	t.Setenv("HCOMM_TOKEN", "")
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "store.env")
	if err := os.WriteFile(path, []byte("stale\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errR, errW := io.Pipe()
	var stdout strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- serveStoreCmd(ctx, []string{"--listen", "127.0.0.1:0", "--env-file", path}, &stdout, errW)
		errW.Close()
	}()
	sc := bufio.NewScanner(errR)
	if !sc.Scan() || !strings.Contains(sc.Text(), "serving on") {
		t.Fatalf("hcomm store said %q first", sc.Text())
	}
	go io.Copy(io.Discard, errR)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("env file mode %v, want 0600", st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		name, value, _ := strings.Cut(l, "=")
		vars[name] = value
	}
	if len(vars) != 2 || len(vars["HCOMM_TOKEN"]) != 2*tokenBytes || !strings.HasPrefix(vars["HCOMM_STORE"], "tcp://127.0.0.1:") {
		t.Fatalf("env file holds %q", data)
	}
	checkStore(t, vars["HCOMM_STORE"], vars["HCOMM_TOKEN"])
	if stdout.Len() != 0 {
		t.Errorf("printed %q on standard output", stdout.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("hcomm store did not stop")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("env file left behind: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".store.env*")); len(m) != 0 {
		t.Errorf("temporary files left behind: %q", m)
	}
}

// TestStoreStdoutWarning: a generated token printed into a file others can
// read (the old "> store.env") draws a warning.
func TestStoreStdoutWarning(t *testing.T) {
	t.Setenv("HCOMM_TOKEN", "")
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, tc := range []struct {
		mode os.FileMode
		warn bool
	}{{0o644, true}, {0o600, false}} {
		out, err := os.OpenFile(filepath.Join(t.TempDir(), "store.env"), os.O_CREATE|os.O_WRONLY, tc.mode)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errR, errW := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- serveStoreCmd(ctx, []string{"--listen", "127.0.0.1:0"}, out, errW)
			errW.Close()
		}()
		sc := bufio.NewScanner(errR)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.Contains(sc.Text(), "serving on") {
				break
			}
		}
		cancel()
		go io.Copy(io.Discard, errR)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		out.Close()
		warned := strings.Contains(strings.Join(lines, "\n"), "other users can read")
		if warned != tc.warn {
			t.Errorf("mode %v: warned %v, want %v; stderr %q", tc.mode, warned, tc.warn, lines)
		}
	}
}
