package hcomm

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer several goroutines' loggers write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestInitBanner: at INFO, Init says what each rank joined.
func TestInitBanner(t *testing.T) {
	const n = 2
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := "file://" + t.TempDir()
	logs := make([]lockedBuffer, n)
	comms := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log := slog.New(slog.NewTextHandler(&logs[r], &slog.HandlerOptions{Level: slog.LevelInfo}))
			comms[r], errs[r] = Init(ctx, &Config{Rank: r, Size: n, Store: st, Token: "t", Hostname: "h", Logger: log})
		}()
	}
	wg.Wait()
	for r, c := range comms {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		defer c.Close()
	}
	for r := range logs {
		out := logs[r].String()
		for _, want := range []string{`msg="hcomm settings"`, `msg="hcomm: joined" rank=` + string(rune('0'+r)) + " size=2",
			"host=h", `transports="shm 1 peers"`, `topology="1 hosts × 2 ranks"`, "version="} {
			if !strings.Contains(out, want) {
				t.Errorf("rank %d's log lacks %q:\n%s", r, want, out)
			}
		}
	}
}
