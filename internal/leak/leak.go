// Package leak keeps the objects of a process that should be closed, each
// with where it was made, for a leak check (hcomm.Unclosed).
package leak

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Set is a set of open objects, each described. The zero Set is empty and
// ready to use; it is safe for concurrent use.
type Set struct {
	mu sync.Mutex
	m  map[any]string
}

// Add records key as open, described by what.
func (s *Set) Add(key any, what string) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[any]string{}
	}
	s.m[key] = what
	s.mu.Unlock()
}

// Remove forgets key.
func (s *Set) Remove(key any) {
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}

// List returns the descriptions of the open objects, sorted.
func (s *Set) List() []string {
	s.mu.Lock()
	out := make([]string, 0, len(s.m))
	for _, what := range s.m {
		out = append(out, what)
	}
	s.mu.Unlock()
	slices.Sort(out)
	return out
}

// Caller returns "file:line" of the first function up the stack of
// Caller's caller that is not in package pkg (an import path) — a test
// file of pkg counts as outside it — or "unknown caller".
func Caller(pkg string) string {
	var pcs [16]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, pkg+".") || strings.HasSuffix(f.File, "_test.go") {
			return fmt.Sprintf("%s:%d", f.File, f.Line)
		}
		if !more {
			return "unknown caller"
		}
	}
}
