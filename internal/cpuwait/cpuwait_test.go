package cpuwait

import (
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestTotal: the wait never goes down, and on Linux, where the kernel
// reports it, threads that outnumber the CPUs and keep busy must wait.
func TestTotal(t *testing.T) {
	before := Total()
	if before < 0 {
		t.Fatalf("Total = %v", before)
	}
	// More busy threads than CPUs, all allowed to run Go code at once.
	n := 2*runtime.NumCPU() + 2
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
			}
		})
	}
	wg.Wait()
	after := Total()
	if after < before {
		t.Fatalf("Total went down: %v, then %v", before, after)
	}
	if _, err := os.Stat("/proc/self/schedstat"); err == nil && after == before {
		t.Errorf("Total unchanged (%v) while %d busy threads shared %d CPUs", after, n, runtime.NumCPU())
	}
	t.Logf("waited %v", after-before)
}
