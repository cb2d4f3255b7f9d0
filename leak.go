package hcomm

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Open communicators, for Unclosed. A communicator that is never closed
// keeps its goroutines (transport readers, watchers) and, in a job, its
// connections for the life of the process.
var open struct {
	mu sync.Mutex
	m  map[*Comm]string // where each was made
}

// track records c as open, made by the caller outside this package.
func track(c *Comm) {
	at := "unknown caller"
	var pcs [16]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs[:])])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "github.com/hcomm-go/hcomm.") || strings.HasSuffix(f.File, "_test.go") {
			at = fmt.Sprintf("%s:%d", f.File, f.Line)
			break
		}
		if !more {
			break
		}
	}
	open.mu.Lock()
	if open.m == nil {
		open.m = map[*Comm]string{}
	}
	open.m[c] = fmt.Sprintf("communicator %s rank %d of %d, made at %s", c.id, c.rank, c.size, at)
	open.mu.Unlock()
}

func untrack(c *Comm) {
	open.mu.Lock()
	delete(open.m, c)
	open.mu.Unlock()
}

// Unclosed describes every communicator of this process that has not been
// closed — its identity, rank, size and the line that made it (Init,
// NewLocal or Split) — sorted. It is a leak check: a program or a test's
// TestMain can call it where every communicator should be closed, as
//
//	if u := hcomm.Unclosed(); len(u) > 0 {
//		log.Fatalf("communicators never closed:\n%s", strings.Join(u, "\n"))
//	}
//
// A communicator not closed keeps its goroutines and connections for the
// life of the process; Close releases them.
func Unclosed() []string {
	open.mu.Lock()
	out := make([]string, 0, len(open.m))
	for _, s := range open.m {
		out = append(out, s)
	}
	open.mu.Unlock()
	slices.Sort(out)
	return out
}
