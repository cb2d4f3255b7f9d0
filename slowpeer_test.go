package hcomm

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/stall"
)

// TestSlowPeerWarn: a rank that keeps arriving late is named in one WARN
// by each rank that waits for it. The late rank enters each collective
// only once both others' stall checks have seen it missing, so the test
// does not depend on timing.
func TestSlowPeerWarn(t *testing.T) {
	const n = 3
	rounds := stall.SlowStreak + 1
	var mu sync.Mutex
	seen := map[uint64]map[int]bool{} // seq → ranks whose check found rank 2 late
	cond := sync.NewCond(&mu)
	noted := func(c *Comm, seq uint64, late []int) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range late {
			if r == n-1 && c.id == "local" {
				if seen[seq] == nil {
					seen[seq] = map[int]bool{}
				}
				seen[seq][c.rank] = true
				cond.Broadcast()
			}
		}
	}
	testLateNoted.Store(&noted)
	defer testLateNoted.Store(nil)
	var logBuf lockedBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	onLocalRanks(t, n, &Config{Timeout: time.Minute, Logger: log}, func(c *Comm) error {
		x := make([]int32, 4)
		for i := range rounds {
			if c.Rank() == n-1 {
				seq := uint64(i + 1)
				mu.Lock()
				for len(seen[seq]) < n-1 {
					cond.Wait()
				}
				mu.Unlock()
			}
			if err := AllReduce(context.Background(), c, x, x, Sum); err != nil {
				return err
			}
		}
		return nil
	})
	out := logBuf.String()
	var warns []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "slow peer") {
			warns = append(warns, l)
		}
	}
	if len(warns) != n-1 {
		t.Fatalf("%d slow-peer warnings, want one by each of ranks 0 and 1:\n%s", len(warns), out)
	}
	for _, w := range warns {
		if !strings.Contains(w, "keeps waiting for rank 2 ") || !strings.Contains(w, "peers=\"rank 2\"") ||
			!strings.Contains(w, "seq="+strconv.Itoa(stall.SlowStreak)) || strings.Contains(w, "rank=2") {
			t.Errorf("warning %q", w)
		}
	}
}
