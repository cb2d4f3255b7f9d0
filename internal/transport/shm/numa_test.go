//go:build linux

package shm

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/hcomm-go/hcomm/internal/wire"
)

// numaPolicy returns the memory policy /proc/self/numa_maps shows for the
// mapping that starts at b.
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
	return "none"
}

// TestRingPlacement gives every rank a home NUMA node (node 0, which this
// machine has) and checks through /proc/self/numa_maps that the rings each
// rank reads were placed there and nothing else was; without a home node
// (one node, or CPUs on several) nothing is placed.
func TestRingPlacement(t *testing.T) {
	for _, node := range []int{0, -1} {
		t.Run(fmt.Sprint("node ", node), func(t *testing.T) {
			old := homeNode
			homeNode = func() int { return node }
			defer func() { homeNode = old }()
			trs := newLocalGroup(t, 3, "")
			want := "prefer:0"
			if node < 0 {
				// Not split off: still within the segment's one mapping.
				want = "none"
			}
			for _, tr := range trs {
				s := tr.seg
				if got := numaPolicy(t, s.mem); got != "default" {
					t.Errorf("rank %d: header page policy %s", tr.me, got)
				}
				for j := range s.n {
					if j == tr.me {
						continue
					}
					if got := numaPolicy(t, s.mem[s.ringOffset(j, tr.me):]); got != want {
						t.Errorf("rank %d: ring from %d: policy %s, want %s", tr.me, j, got, want)
					}
				}
			}
			// The placed rings carry messages as before.
			var fp wire.Fingerprint
			msg := make([]byte, 64<<10)
			fill(msg, 7)
			done := make(chan error, 1)
			go func() { done <- trs[0].Send(context.Background(), 2, &fp, msg) }()
			got := make([]byte, len(msg))
			if err := trs[2].Recv(context.Background(), 0, &fp, got); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if err := check(got, 7); err != nil {
				t.Error(err)
			}
		})
	}
}
