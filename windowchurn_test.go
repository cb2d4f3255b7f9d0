package hcomm

import (
	"context"
	"errors"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestWindowChurnInJob: windows made and closed again and again by the
// ranks of a job keep no memory behind (each kept its whole closed
// transport, about 35 KB, reachable from the job's dump watcher).
func TestWindowChurnInJob(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	comms := jobPair(t, ctx, "tcp")
	defer comms[0].Close()
	var errs [2]error
	var wg sync.WaitGroup
	churn := func(k int) {
		for range k {
			for r, c := range comms {
				wg.Go(func() {
					w, err := c.NewWindow(ctx, make([]byte, 64))
					if err != nil {
						errs[r] = err
						return
					}
					errs[r] = w.Close(ctx)
				})
			}
			wg.Wait()
			if err := errors.Join(errs[:]...); err != nil {
				t.Fatal(err)
			}
		}
	}
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapInuse)
	}
	churn(5)
	h0 := heap()
	churn(80)
	h1 := heap()
	t.Logf("heap in use %d, %+d after 80 windows", h0, h1-h0)
	if per := (h1 - h0) / 80; per > 8192 {
		t.Errorf("each window made and closed keeps about %d bytes", per)
	}
}
