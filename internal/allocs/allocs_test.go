package allocs

import (
	"testing"
)

var sink []byte

// TestPerRun: a call that allocates every time is counted as allocating
// in every try; one that allocates on its first calls only (as the
// runtime does for a goroutine's first wait) is counted as not.
func TestPerRun(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("instrumented build")
	}
	if a := PerRun(20, 0, func() { sink = make([]byte, 64) }); a != 1 {
		t.Errorf("a call allocating once: %v allocations per run, want 1", a)
	}
	if a := PerRun(5, 1, func() { sink = make([]byte, 64); sink = make([]byte, 64) }); a != 2 {
		t.Errorf("a call allocating twice, with 1 allowed: %v allocations per run, want 2", a)
	}
	// The first four calls allocate: the first two tries (a warm-up and
	// one counted call each) count one allocation per run, the third
	// none.
	n := 0
	if a := PerRun(1, 0, func() {
		if n++; n <= 4 {
			sink = make([]byte, 64)
		}
	}); a != 0 {
		t.Errorf("a call allocating on its first calls only: %v allocations per run, want 0", a)
	}
	if n != Calls(1) {
		t.Errorf("%d calls, want three tries of a warm-up and a counted call", n)
	}
}
