package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"
)

const testToken = "test-job-token"

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startServer runs a TCP store server on a loopback port for the duration
// of t.
func startServer(t testing.TB, cfg ServerConfig) *Server {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = discardLogger()
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dialTest(t testing.TB, addr, token string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, &ClientConfig{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPrefixIsolation(t *testing.T) {
	checkNoLeaks(t)
	ctx := testCtx(t)
	fs, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	a, b := WithPrefix(fs, "a"), WithPrefix(fs, "b")
	if err := a.Set(ctx, "k", []byte("from a")); err != nil {
		t.Fatal(err)
	}
	if err := b.Set(ctx, "k", []byte("from b")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    Store
		key  string
		want string
	}{{a, "k", "from a"}, {b, "k", "from b"}, {fs, "a/k", "from a"}, {fs, "b/k", "from b"}} {
		if v, err := c.s.Get(ctx, c.key); err != nil || string(v) != c.want {
			t.Errorf("Get(%q) = %q, %v; want %q", c.key, v, err, c.want)
		}
	}
	// Closing a view leaves the base and other views working.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ctx, "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get on closed view: err = %v, want ErrClosed", err)
	}
	if v, err := b.Get(ctx, "k"); err != nil || string(v) != "from b" {
		t.Errorf("Get on other view after Close = %q, %v", v, err)
	}
}

func TestOpen(t *testing.T) {
	checkNoLeaks(t)
	srv := startServer(t, ServerConfig{Token: testToken})
	dir := t.TempDir()
	tests := []struct {
		url  string
		want string // type of the store, or "" for an error
	}{
		{"tcp://" + srv.Addr().String(), "*store.Client"},
		{"tcp://" + srv.Addr().String() + "/", "*store.Client"},
		{"file://" + dir, "*store.FileStore"},
		{"file://localhost" + dir, "*store.FileStore"},
		{"tcp://127.0.0.1", ""},
		{"tcp://:80", ""},
		{"tcp://127.0.0.1:80/path", ""},
		{"file://otherhost/dir", ""},
		{"file:relative", ""},
		{"file://", ""},
		{"http://127.0.0.1:80", ""},
		{"127.0.0.1:80", ""},
		{"::bad", ""},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := Open(ctx, tt.url, testToken)
		cancel()
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("Open(%q) succeeded, want an error", tt.url)
			s.Close()
		case tt.want != "" && err != nil:
			t.Errorf("Open(%q): %v", tt.url, err)
		case err == nil:
			if got := fmt.Sprintf("%T", s); got != tt.want {
				t.Errorf("Open(%q) = %s, want %s", tt.url, got, tt.want)
			}
			s.Close()
		}
	}
}

// TestMaxKeySize checks that the longest key works on the bare backends
// (the suite stays a little below it, for prefix views).
func TestMaxKeySize(t *testing.T) {
	checkNoLeaks(t)
	ctx := testCtx(t)
	srv := startServer(t, ServerConfig{Token: testToken})
	fs, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	long := strings.Repeat("k", MaxKeySize)
	for _, s := range []Store{dialTest(t, srv.Addr().String(), testToken), fs} {
		if err := s.Set(ctx, long, []byte("ok")); err != nil {
			t.Fatalf("%T: Set with a %d-byte key: %v", s, MaxKeySize, err)
		}
		if v, err := s.Get(ctx, long); err != nil || string(v) != "ok" {
			t.Fatalf("%T: Get with a %d-byte key = %q, %v", s, MaxKeySize, v, err)
		}
	}
}

func TestRegister(t *testing.T) {
	checkNoLeaks(t)
	ctx := testCtx(t)
	if _, err := Open(ctx, "mem://x/y", ""); err == nil || !strings.Contains(err.Error(), "etcdstore") {
		t.Fatalf("Open of an unregistered scheme: err = %v, want a hint at etcdstore", err)
	}
	var got *url.URL
	Register("mem", func(ctx context.Context, u *url.URL, token string) (Store, error) {
		got = u
		return NewFileStore(t.TempDir())
	})
	defer func() {
		registry.Lock()
		delete(registry.m, "mem")
		registry.Unlock()
	}()
	s, err := Open(ctx, "mem://host/prefix", "tok")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got == nil || got.Host != "host" || got.Path != "/prefix" {
		t.Fatalf("the registered opener got %v", got)
	}
	for _, scheme := range []string{"tcp", "file", "mem"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", scheme)
				}
			}()
			Register(scheme, nil)
		}()
	}
	if _, err := Open(ctx, "other://u:secret@h/p", ""); err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "mem") {
		t.Fatalf("Open of an unknown scheme: err = %v, want the registered schemes and no password", err)
	}
}
