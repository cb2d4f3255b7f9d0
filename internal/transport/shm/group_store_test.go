//go:build linux

package shm

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestHasPrefetchW: the CPUID check agrees with the kernel's flags, and
// PREFETCHW runs where it is said to exist. On AMD and Hygon CPUs the
// kernel also lists 3dnowprefetch where CPUID does not (it infers it from
// long mode), so there a flag without the CPUID bit is no disagreement.
func TestHasPrefetchW(t *testing.T) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skip(err)
	}
	inferred := false // the kernel may list the flag without the CPUID bit
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "vendor_id" {
			vendor := strings.TrimSpace(v)
			inferred = vendor == "AuthenticAMD" || vendor == "HygonGenuine"
		}
		if ok && strings.TrimSpace(k) == "flags" {
			want := slices.Contains(strings.Fields(v), "3dnowprefetch")
			if want && !hasPrefetchW && inferred {
				t.Skip("/proc/cpuinfo lists 3dnowprefetch, which the kernel infers on this vendor's CPUs, and CPUID does not")
			}
			if hasPrefetchW != want {
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
