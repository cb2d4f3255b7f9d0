// Package cpuwait tells how long a process has waited for a CPU while it
// could run: the time a loaded machine added to whatever the process did.
// Tests that bound how long something takes add it to their bound, so that
// they hold a mechanism to its own time and not to the machine's load.
package cpuwait

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Total returns how long, in all, the threads of this process have been
// runnable but not running (the second field of each
// /proc/self/task/*/schedstat, the kernel's run_delay), or 0 where the
// kernel does not say. Threads that exited no longer count; a Go process
// rarely ends its threads. The difference of two calls bounds what the
// process was kept waiting in between.
func Total() time.Duration {
	paths, _ := filepath.Glob("/proc/self/task/*/schedstat")
	var sum int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil && n > 0 {
				sum += n
			}
		}
	}
	return time.Duration(sum)
}
