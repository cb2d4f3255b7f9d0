//go:build linux

package shm

import (
	"encoding/binary"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mappedPages counts the pages of b present in this process's page tables
// (/proc/self/pagemap, bit 63 of each page's entry).
func mappedPages(t *testing.T, b []byte) (present, total int) {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skipf("no pagemap: %v", err)
	}
	defer f.Close()
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b))) / pageSize
	total = len(b) / pageSize
	buf := make([]byte, 8*total)
	if _, err := f.ReadAt(buf, int64(start)*8); err != nil {
		t.Fatalf("read pagemap: %v", err)
	}
	for i := range total {
		if binary.LittleEndian.Uint64(buf[8*i:])&(1<<63) != 0 {
			present++
		}
	}
	return present, total
}

// TestPopulate: a new transport has the group area and its rings mapped
// before its first call, so no call takes a page fault on them; without
// populate (the variant) they are not.
func TestPopulate(t *testing.T) {
	probe, err := unix.Mmap(-1, 0, pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Madvise(probe, unix.MADV_POPULATE_WRITE)
	unix.Munmap(probe)
	if err != nil {
		t.Skipf("no MADV_POPULATE_WRITE (Linux 5.14): %v", err)
	}
	// One NUMA node, whatever this machine has: with a home node the
	// rings are placed (placeIncoming) rather than populated.
	old := homeNode
	homeNode = func() int { return -1 }
	defer func() { homeNode = old }()
	for _, variant := range []string{"default", "nopopulate"} {
		t.Run(variant, func(t *testing.T) {
			trs := newLocalGroup(t, 2, variant)
			seg := trs[0].seg
			areas := map[string][]byte{
				"group area":  seg.mem[seg.groupOffset(0) : seg.groupOffset(0)+2*groupBlock],
				"ring 0 to 1": seg.mem[seg.ringOffset(0, 1) : seg.ringOffset(0, 1)+pageSize+2*pageSize],
			}
			for name, b := range areas {
				present, total := mappedPages(t, b)
				switch {
				case variant == "default" && present != total:
					t.Errorf("%s: %d of %d pages mapped before the first call, want all", name, present, total)
				case variant == "nopopulate" && present == total:
					t.Errorf("%s: all %d pages mapped without populate; the check cannot tell", name, total)
				}
			}
		})
	}
}
