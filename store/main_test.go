package store

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	code := m.Run()
	if code == 0 {
		if err := settleGoroutines(5 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// ourGoroutines returns the stacks of the goroutines, other than the
// caller's, that run this package's code or were started by it. Goroutines
// of the testing machinery, which run the tests themselves, do not count.
func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var ours []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i > 0 && strings.Contains(g, "hcomm-go/hcomm/store.") && !strings.Contains(g, "testing.tRunner") && !strings.Contains(g, "testing.(*M)") {
			ours = append(ours, g)
		}
	}
	return ours
}

// settleGoroutines waits until none of this package's goroutines run, and
// otherwise reports the stacks of those that do.
func settleGoroutines(patience time.Duration) error {
	deadline := time.Now().Add(patience)
	for {
		left := ourGoroutines()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("goroutine leak: %d goroutines left behind:\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkNoLeaks fails t if, once t's cleanups have run, goroutines of this
// package still run. Call it first so that its cleanup runs last.
func checkNoLeaks(t *testing.T) {
	t.Cleanup(func() {
		if err := settleGoroutines(3 * time.Second); err != nil {
			t.Error(err)
		}
	})
}
