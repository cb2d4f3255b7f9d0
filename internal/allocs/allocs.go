// Package allocs counts the allocations of a call in tests, for calls that
// wake other goroutines or processes.
package allocs

import "testing"

// tries is how many times PerRun counts at most.
const tries = 3

// Calls is the most calls of f that PerRun(runs, want, f) makes (each
// count calls f once more than runs, to warm up): a peer that answers
// every call (an echo) is told to expect this many, and the caller makes
// up the difference after PerRun.
func Calls(runs int) int { return tries * (runs + 1) }

// PerRun is testing.AllocsPerRun(runs, f) counted up to three times,
// keeping the least, and stopping at the first count at most want.
//
// A call that hands off to another goroutine (a channel send, a wake-up,
// a peer's echo) can see the runtime allocate on its behalf now and then:
// a waiter's record (sudog) when its P's cache is empty, as after the
// GOMAXPROCS change AllocsPerRun makes or a collection, more often under
// -race and on a loaded machine. Those do not repeat from one count to
// the next; an allocation of the call's own happens on every call and
// shows in every count, so it still fails a test that wants fewer.
func PerRun(runs int, want float64, f func()) float64 {
	a := testing.AllocsPerRun(runs, f)
	for try := 1; try < tries && a > want; try++ {
		a = min(a, testing.AllocsPerRun(runs, f))
	}
	return a
}
