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

// TestOpDebugLine: at DEBUG every collective logs one line naming the
// algorithm and why it was chosen; at INFO none does.
func TestOpDebugLine(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		algo  string
		want  []string
	}{
		{slog.LevelDebug, "", []string{`msg="hcomm: op" comm=local rank=0 seq=1 op=AllReduce dtype=float32 bytes=4096 algo=`, `why="cheapest under the cost model"`}},
		{slog.LevelDebug, "allreduce=ring", []string{"op=AllReduce dtype=float32 bytes=4096 algo=ring", `why="forced (HCOMM_ALGO / Config.Algo)"`}},
		{slog.LevelInfo, "", nil},
	} {
		var logs lockedBuffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: tc.level}))
		onLocalRanks(t, 2, &Config{Timeout: time.Minute, Algo: tc.algo, Logger: log}, func(c *Comm) error {
			x := make([]float32, 1024)
			return AllReduce(context.Background(), c, x, x, Sum)
		})
		out := logs.String()
		if tc.want == nil {
			if strings.Contains(out, "hcomm: op") {
				t.Errorf("level %v logs ops:\n%s", tc.level, out)
			}
			continue
		}
		if n := strings.Count(out, `msg="hcomm: op"`); n != 2 {
			t.Errorf("algo %q: %d op lines for one AllReduce on 2 ranks:\n%s", tc.algo, n, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("algo %q: the log lacks %q:\n%s", tc.algo, w, out)
			}
		}
	}
}
