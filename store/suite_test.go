package store_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/store"
	"github.com/hcomm-go/hcomm/store/storetest"
)

const suiteToken = "suite-token"

// tcpServer runs a TCP store server on a loopback port for the duration of
// t and returns an Opener of clients to it, each seen through wrap.
func tcpServer(t *testing.T, wrap func(t *testing.T, s store.Store) store.Store) storetest.Opener {
	srv, err := store.NewServer(store.ServerConfig{Token: suiteToken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return func(t *testing.T) store.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := store.Dial(ctx, srv.Addr().String(), &store.ClientConfig{Token: suiteToken})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return wrap(t, c)
	}
}

// fileDir makes a FileStore directory for t and returns an Opener of
// stores in it, each seen through wrap.
func fileDir(t *testing.T, wrap func(t *testing.T, s store.Store) store.Store) storetest.Opener {
	dir := t.TempDir()
	return func(t *testing.T) store.Store {
		fs, err := store.NewFileStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fs.Close() })
		return wrap(t, fs)
	}
}

func bare(t *testing.T, s store.Store) store.Store { return s }

func prefixed(prefixes ...string) func(t *testing.T, s store.Store) store.Store {
	return func(t *testing.T, s store.Store) store.Store {
		for _, p := range prefixes {
			s = store.WithPrefix(s, p)
			v := s
			t.Cleanup(func() { v.Close() })
		}
		return s
	}
}

// TestStore runs the store suite against every backend of this package.
func TestStore(t *testing.T) {
	backends := []struct {
		name  string
		fresh func(t *testing.T) storetest.Opener
	}{
		{"tcp", func(t *testing.T) storetest.Opener { return tcpServer(t, bare) }},
		{"file", func(t *testing.T) storetest.Opener { return fileDir(t, bare) }},
		{"tcp/prefix", func(t *testing.T) storetest.Opener { return tcpServer(t, prefixed("comm7")) }},
		{"file/prefix", func(t *testing.T) storetest.Opener { return fileDir(t, prefixed("a", "b")) }},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Opener {
				store.CheckNoLeaks(t)
				return b.fresh(t)
			})
		})
	}
}
