package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/store"
)

// startStoreCmd runs `hcomm store` with args until the test ends and
// returns the variables it printed.
func startStoreCmd(t *testing.T, nvars int, args ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serveStoreCmd(ctx, args, pw, io.Discard)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		go io.Copy(io.Discard, pr)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("hcomm store: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("hcomm store did not stop")
		}
	})
	vars := make(map[string]string)
	sc := bufio.NewScanner(pr)
	for len(vars) < nvars && sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), "=")
		vars[name] = value
	}
	if len(vars) < nvars {
		t.Fatalf("hcomm store printed %v", vars)
	}
	return vars
}

// checkStore sets and gets a key through the store at url with token.
func checkStore(t *testing.T, url, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := store.Open(ctx, url, token)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(ctx, "k"); err != nil || string(v) != "v" {
		t.Fatalf("Get = %q, %v", v, err)
	}
}

func TestStoreCmd(t *testing.T) {
	t.Setenv("HCOMM_TOKEN", "")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("  file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("token-file", func(t *testing.T) {
		vars := startStoreCmd(t, 1, "--listen", "127.0.0.1:0", "--token-file", tokenFile)
		url := vars["HCOMM_STORE"]
		if !strings.HasPrefix(url, "tcp://127.0.0.1:") {
			t.Fatalf("HCOMM_STORE=%q", url)
		}
		checkStore(t, url, "file-secret")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if s, err := store.Open(ctx, url, "wrong"); !errors.Is(err, store.ErrUnauthorized) {
			if s != nil {
				s.Close()
			}
			t.Errorf("wrong token: %v, want ErrUnauthorized", err)
		}
	})
	t.Run("generated", func(t *testing.T) {
		vars := startStoreCmd(t, 2, "--listen", "127.0.0.1:0")
		if tok := vars["HCOMM_TOKEN"]; len(tok) != 2*tokenBytes {
			t.Fatalf("HCOMM_TOKEN=%q", tok)
		}
		checkStore(t, vars["HCOMM_STORE"], vars["HCOMM_TOKEN"])
	})
	t.Run("token", func(t *testing.T) {
		vars := startStoreCmd(t, 1, "--listen", "127.0.0.1:0", "--token", "flag-secret")
		checkStore(t, vars["HCOMM_STORE"], "flag-secret")
	})
}

func TestStoreCmdErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--token", "a", "--token-file", "b"}, "exclude each other"},
		{[]string{"--token-file", "/nonexistent/token"}, "no such file"},
		{[]string{"--listen", "nonsense"}, "nonsense"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--listen", "127.0.0.1:0", "--env-file", "/nonexistent/dir/store.env"}, "--env-file"},
		{[]string{"--bogus"}, "bogus"},
	} {
		err := serveStoreCmd(context.Background(), tc.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	if err := serveStoreCmd(context.Background(), []string{"--token-file", empty}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty token file: %v", err)
	}
}

func TestStoreToken(t *testing.T) {
	t.Setenv("HCOMM_TOKEN", "env-secret")
	if tok, gen, err := storeToken("", ""); tok != "env-secret" || gen || err != nil {
		t.Errorf("from the environment: %q, %v, %v", tok, gen, err)
	}
	if tok, gen, err := storeToken("flag", ""); tok != "flag" || gen || err != nil {
		t.Errorf("from the flag: %q, %v, %v", tok, gen, err)
	}
	t.Setenv("HCOMM_TOKEN", "")
	a, gen, err := storeToken("", "")
	b, _, _ := storeToken("", "")
	if !gen || err != nil || len(a) != 2*tokenBytes || a == b {
		t.Errorf("generated %q and %q, %v, %v", a, b, gen, err)
	}
}
