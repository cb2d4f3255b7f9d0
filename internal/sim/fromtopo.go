package sim

import (
	"fmt"
	"slices"

	"github.com/hcomm-go/hcomm/internal/topo"
)

// FromFile returns base with the placement and link speeds of a topology
// file (internal/topo: hcomm's own format or an HCCL rank table): ranks per
// host, hosts per group (rack), and the intra-host, inter-host and
// in-group speeds it gives (α and the other parameters stay base's). A
// regular placement (hosts of equally many consecutive ranks, groups of
// equally many consecutive hosts, the last of each possibly smaller)
// becomes RanksPerHost and HostsPerRack, so that one period of ranks can
// stand for all; any other is kept as a table, every rank simulated.
func FromFile(f *topo.File, base Topology) (Topology, error) {
	t := base
	t.Ranks = 0
	if len(f.Hosts) == 0 {
		return t, fmt.Errorf("sim: %s: no hosts", f.Source)
	}
	if regular(f) {
		t.RanksPerHost = len(f.Hosts[0].Ranks)
		t.HostsPerRack = 0
		if K := groupRun(f); K < len(f.Hosts) {
			t.HostsPerRack = K
		}
		for _, h := range f.Hosts {
			t.Ranks += len(h.Ranks)
		}
	} else {
		// Any placement: tables, every rank simulated.
		groups := map[string]int32{}
		t.groupOf = make([]int32, len(f.Hosts))
		t.RanksPerHost = 0
		for i, h := range f.Hosts {
			t.Ranks += len(h.Ranks)
			t.RanksPerHost = max(t.RanksPerHost, len(h.Ranks))
			g, ok := groups[h.Group]
			if !ok {
				g = int32(len(groups))
				groups[h.Group] = g
			}
			t.groupOf[i] = g
		}
		t.hostOf = make([]int32, t.Ranks)
		seen := make([]bool, t.Ranks)
		for i, h := range f.Hosts {
			for _, r := range h.Ranks {
				if r < 0 || r >= t.Ranks || seen[r] {
					return t, fmt.Errorf("sim: %s: ranks are not 0..%d each once (rank %d)", f.Source, t.Ranks-1, r)
				}
				seen[r] = true
				t.hostOf[r] = int32(i)
			}
		}
		t.HostsPerRack = 0
		if len(groups) > 1 {
			t.HostsPerRack = 1 // racks from groupOf
		}
	}
	gbit := func(g float64) float64 { return g * 1e9 / 8 } // bytes/s
	if l := f.Links; l.Intra > 0 {
		t.SHM.Beta = 1 / gbit(l.Intra)
	}
	if l := f.Links; l.Inter > 0 {
		t.Rack.Beta = 1 / gbit(l.Inter)
		t.Net.Beta = t.Rack.Beta
		t.NICBW = gbit(l.Inter)
	}
	if l := f.Links; l.Group > 0 {
		t.Net.Beta = 1 / gbit(l.Group)
		t.NICBW = max(t.NICBW, gbit(l.Group))
	}
	if t.Name == "" || t.Name == base.Name {
		t.Name = f.Source
	}
	return t, t.Check()
}

// regular reports whether f places equally many consecutive ranks on each
// host (the last may have fewer) and equally many consecutive hosts in each
// group (the last may have fewer).
func regular(f *topo.File) bool {
	R := len(f.Hosts[0].Ranks)
	next := 0
	for i, h := range f.Hosts {
		rs := slices.Sorted(slices.Values(h.Ranks))
		if len(rs) != R && !(i == len(f.Hosts)-1 && len(rs) < R) {
			return false
		}
		for _, r := range rs {
			if r != next {
				return false
			}
			next++
		}
	}
	K := groupRun(f)
	seen := map[string]bool{}
	for i := 0; i < len(f.Hosts); i += K {
		g := f.Hosts[i].Group
		if seen[g] {
			return false
		}
		seen[g] = true
		for j := i; j < min(i+K, len(f.Hosts)); j++ {
			if f.Hosts[j].Group != g {
				return false
			}
		}
	}
	return true
}

// groupRun returns how many hosts from the first share its group.
func groupRun(f *topo.File) int {
	K := 0
	for K < len(f.Hosts) && f.Hosts[K].Group == f.Hosts[0].Group {
		K++
	}
	return K
}
