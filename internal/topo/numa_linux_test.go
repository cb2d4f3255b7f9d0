package topo

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// numaPolicy returns the policy /proc/self/numa_maps shows for the
// mapping starting at b.
func numaPolicy(t *testing.T, b []byte) string {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/numa_maps")
	if err != nil {
		t.Skipf("no numa_maps: %v", err)
	}
	start := fmt.Sprintf("%x ", uintptr(unsafe.Pointer(&b[0])))
	for _, line := range strings.Split(string(maps), "\n") {
		if strings.HasPrefix(line, start) {
			return strings.Fields(line)[1]
		}
	}
	t.Fatalf("no mapping at %s in numa_maps", start)
	return ""
}

// TestPlace places the middle pages of a shared file mapping, as the shm
// transport places a ring, on node 0 (which every Linux machine has) and
// reads the policy back from /proc/self/numa_maps.
func TestPlace(t *testing.T) {
	f, err := os.CreateTemp("/dev/shm", "hcomm-topo-test-")
	if err != nil {
		t.Skip(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := os.Getpagesize()
	if err := f.Truncate(int64(4 * page)); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, 4*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	for i := 0; i < len(mem); i += page {
		mem[i] = 1
	}
	if got := numaPolicy(t, mem); got != "default" {
		t.Fatalf("policy before Place: %s", got)
	}
	if err := Place(mem[page:3*page], 0); err != nil {
		t.Fatal(err)
	}
	// The range is split off its mapping with its own policy.
	if got := numaPolicy(t, mem[page:]); got != "prefer:0" {
		t.Errorf("placed pages: policy %s, want prefer:0", got)
	}
	if got := numaPolicy(t, mem[3*page:]); got != "default" {
		t.Errorf("pages after the range: policy %s, want default", got)
	}
	if err := Place(mem[page:], 5000); err == nil {
		t.Error("node 5000 placed")
	}
	if err := Place(mem[1:page+1], 0); err == nil {
		t.Error("unaligned range placed")
	}
	if err := Place(nil, 0); err != nil {
		t.Errorf("empty range: %v", err)
	}
}
