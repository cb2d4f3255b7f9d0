//go:build linux

package shm

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestHasPrefetchW: the CPUID check agrees with the kernel's flags, and
// PREFETCHW runs where it is said to exist.
func TestHasPrefetchW(t *testing.T) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			if want := slices.Contains(strings.Fields(v), "3dnowprefetch"); hasPrefetchW != want {
				t.Fatalf("hasPrefetchW %v, /proc/cpuinfo lists 3dnowprefetch: %v", hasPrefetchW, want)
			}
			if hasPrefetchW {
				var x [64]byte
				prefetchW(&x[0])
			}
			return
		}
	}
	t.Skip("no flags line in /proc/cpuinfo")
}

// TestGroupSlotFree: a slot is free for call s once every other rank is
// known done with the call last written there, and not before.
func TestGroupSlotFree(t *testing.T) {
	var g group
	g.last[5] = 37 // call 37 used slot 5; call 69 uses it next
	for _, tc := range []struct {
		least uint32
		want  bool
	}{{36, false}, {37, true}, {60, true}, {0xffffffff, false}} {
		g.least = tc.least
		if got := g.free(69); got != tc.want {
			t.Errorf("least %d: free(69) = %v, want %v", tc.least, got, tc.want)
		}
	}
	g.last[21], g.least = 0xfffffff5, 0xfffffff6 // slot 21, across the wrap of the 32-bit sequence
	if !g.free(0x15) {
		t.Error("a slot done with before the sequence wrapped is not free")
	}
}
