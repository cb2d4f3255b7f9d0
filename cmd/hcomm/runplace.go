package main

import (
	"fmt"
	"path/filepath"

	"github.com/hcomm-go/hcomm/internal/topo"
)

// mapBy reorders hosts for a --map-by policy: "slot" (the default) fills
// each host's slots before the next host's, as given; "node" deals ranks
// round-robin across the hosts, one slot of each in turn, as mpirun
// --map-by node does. assign then places ranks in the order returned.
func mapBy(policy string, hosts []hostSlots) ([]hostSlots, error) {
	switch policy {
	case "", "slot", "core":
		return hosts, nil
	case "node":
	default:
		return nil, fmt.Errorf("--map-by %q: want slot or node", policy)
	}
	var out []hostSlots
	for round, more := 0, true; more; round++ {
		more = false
		for _, h := range hosts {
			if h.slots > round {
				out = append(out, hostSlots{name: h.name, slots: 1})
				more = true
			}
		}
	}
	return out, nil
}

// rankTableHosts reads a topology file for --rank-table: the hosts in the
// order that places every rank where the file says (assign fills them in
// order), and the file's absolute path for HCOMM_RANK_TABLE.
func rankTableHosts(path string, n int) ([]hostSlots, string, error) {
	f, err := topo.Load(path)
	if err != nil {
		return nil, "", fmt.Errorf("--rank-table: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, "", err
	}
	hostOf := map[int]string{}
	for _, h := range f.Hosts {
		if err := checkHostName(h.Name); err != nil {
			return nil, "", fmt.Errorf("--rank-table %s: %w", path, err)
		}
		for _, r := range h.Ranks {
			hostOf[r] = h.Name
		}
	}
	if n != 0 && n != len(hostOf) {
		return nil, "", fmt.Errorf("--rank-table %s places %d ranks, not -n %d", path, len(hostOf), n)
	}
	var hosts []hostSlots
	for r := range len(hostOf) {
		if k := len(hosts) - 1; k >= 0 && hosts[k].name == hostOf[r] {
			hosts[k].slots++
			continue
		}
		hosts = append(hosts, hostSlots{name: hostOf[r], slots: 1})
	}
	return hosts, abs, nil
}
