package topo

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestTwoSocketTree runs discovery end to end on a directory laid out as a
// two-socket machine's /sys and /proc (testdata/twosocket: CPUs 0-3,8-11
// on node 0 with eth0, 4-7,12-15 on node 1 with ib0), so that what a
// one-node machine cannot show is observed: the binding of each local rank,
// its card's node, the node its shared-memory rings are placed on, the
// CPUs its polling goroutines are pinned to, and the ring order and link
// levels of the joined topology.
func TestTwoSocketTree(t *testing.T) {
	m, err := Probe(os.DirFS("testdata/twosocket"))
	if err != nil {
		t.Fatal(err)
	}
	node0, node1 := []int{0, 1, 2, 3, 8, 9, 10, 11}, []int{4, 5, 6, 7, 12, 13, 14, 15}
	if m.Hostname != "box" || len(m.Nodes) != 2 || !slices.Equal(m.Nodes[0].CPUs, node0) || !slices.Equal(m.Nodes[1].CPUs, node1) {
		t.Fatalf("machine %+v", m)
	}
	all := append(slices.Clone(node0), node1...)
	slices.Sort(all)
	ifaddrs := map[string][]string{"eth0": {"10.0.0.1"}, "ib0": {"10.1.0.1"}}

	// Four ranks on the host, --bind-to numa: local ranks 0,1 on node 0,
	// 2,3 on node 1. Rank r has local rank localOf[r], so rank order and
	// node order differ.
	localOf := []int{0, 2, 1, 3}
	cards := make([]Card, 4)
	for r, local := range localOf {
		cpus, err := Bind(BindNUMA, m, all, local, 4)
		if err != nil {
			t.Fatal(err)
		}
		wantNode, wantCPUs := local/2, [][]int{node0, node1}[local/2]
		if !slices.Equal(cpus, wantCPUs) {
			t.Errorf("rank %d (local %d): bound to %v, want node %d's %v", r, local, cpus, wantNode, wantCPUs)
		}
		c := NewCard(m, "box", cpus, "10.1.0.1", ifaddrs)
		if c.NUMA != wantNode || c.DataNIC != "ib0" {
			t.Errorf("rank %d: card node %d data NIC %q, want node %d, ib0", r, c.NUMA, c.DataNIC, wantNode)
		}
		if got := HomeNode(m, c.CPUs); got != wantNode {
			t.Errorf("rank %d: rings placed on node %d, want %d", r, got, wantNode)
		}
		// auto: a bound rank polls on its CPUs near the data NIC (node
		// 1), or on all of its CPUs when it has none there.
		if got, err := (Poll{Mode: "auto"}).PollCPUs(c); err != nil || !slices.Equal(got, wantCPUs) {
			t.Errorf("rank %d: polling on %v (%v), want %v", r, got, err, wantCPUs)
		}
		b, err := c.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if err := cards[r].UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := Bind(BindCore, m, all, 2, 4); err != nil || !slices.Equal(got, []int{2}) {
		t.Errorf("--bind-to core, local rank 2: %v (%v)", got, err)
	}

	// An unbound rank: no home node (its CPUs span both), no pinning
	// under auto, the data NIC's node under nic.
	free := NewCard(m, "box", all, "10.1.0.1", ifaddrs)
	if free.NUMA != -1 || HomeNode(m, free.CPUs) != -1 {
		t.Errorf("unbound rank: card node %d, home node %d, want -1", free.NUMA, HomeNode(m, free.CPUs))
	}
	if got, _ := (Poll{Mode: "auto"}).PollCPUs(free); got != nil {
		t.Errorf("unbound rank pins its polling to %v under auto", got)
	}
	if got, _ := (Poll{Mode: "nic"}).PollCPUs(free); !slices.Equal(got, node1) {
		t.Errorf("unbound rank under nic polls on %v, want ib0's node %v", got, node1)
	}

	topo, err := Build(cards, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := topo.RingOrder(); !slices.Equal(got, []int{0, 2, 1, 3}) {
		t.Errorf("ring %v, want node 0's ranks 0 2 before node 1's 1 3", got)
	}
	if topo.Level(0, 2) != SameNUMA || topo.Level(0, 1) != SameHost || topo.Level(1, 3) != SameNUMA {
		t.Errorf("levels 0-2 %v, 0-1 %v, 1-3 %v", topo.Level(0, 2), topo.Level(0, 1), topo.Level(1, 3))
	}
	var sb strings.Builder
	topo.Format(&sb)
	for _, want := range []string{"numa 1: cpus 4-7,12-15", "nic ib0: 100000 Mb/s, mtu 4092, numa 1, up (data)",
		"nic eth0: 25000 Mb/s, mtu 1500, numa 0, up\n", "rank 1: local 1, numa 1, cpus 4-7,12-15", "ring: 0 2 1 3"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("Format lacks %q:\n%s", want, sb.String())
		}
	}
}
