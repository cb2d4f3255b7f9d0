package topo

import "slices"

// BindAuto is HCOMM_BIND_TO's default (and hcomm run --bind-to's): bind
// nothing before Init, then, where several hosts of the job share a
// kernel and none of their ranks is bound, give each rank its share of
// that kernel's CPUs (Topology.SpreadShared).
const BindAuto = "auto"

// maxSpread is the most ranks per CPU SpreadShared binds.
const maxSpread = 2

// SpreadShared binds, in t, the ranks of every kernel that several hosts
// of the job share (network namespaces or containers of one machine) to
// their share of its CPUs, when no rank of that kernel is bound already —
// every one may run on the same CPUs, at least two — and each is a
// process of its own. It returns the CPUs it gave rank self, nil when it
// left self as it was; the caller binds the process to them. Every rank
// computes the same from the same topology, so HostRanks, Crowd and the
// leaders they choose agree on every rank without another exchange.
//
// Why: only the hosts' leaders send between hosts in the leader forms,
// and each send does its network-stack work on the sender's CPU. Unbound,
// the kernel places the ranks, and a job whose two leaders it puts on one
// CPU takes turns there for every message: 8-byte AllReduce on 2
// namespaces × 2 ranks of a 2-CPU machine measured 33–35 µs in such jobs
// and 20–25 µs in the others. Bound, HostRanks puts the leaders on
// different CPUs and every job is the fast one.
//
// Kernels whose ranks outnumber their CPUs more than maxSpread times are
// left alone: on 2 namespaces × 4 ranks of that machine (4 a CPU), bound
// ranks measured 8-byte AllReduce 44 µs against 55 unbound, but Barrier
// 94 µs against 67 (under load, 3 alternated rounds).
//
// The ranks of the kernel, host after host (each host's ranks in order),
// are dealt the CPUs in order: when they are at most as many as the CPUs,
// rank i of R gets the i-th of R equal runs of the CPUs (so a program
// keeps its share of a large machine); when they outnumber the CPUs, CPU
// i mod n, so a host's ranks are on different CPUs while there are CPUs.
func (t *Topology) SpreadShared(self int) []int {
	var mine []int
	for _, hosts := range t.SharedMachines() {
		var ranks []int
		for _, h := range hosts {
			ranks = append(ranks, t.Hosts[h].Ranks...)
		}
		cpus := t.unbound(ranks)
		if cpus == nil || len(ranks) > maxSpread*len(cpus) {
			continue
		}
		n, R := len(cpus), len(ranks)
		for i, r := range ranks {
			var got []int
			if R <= n {
				got = slices.Clone(cpus[i*n/R : (i+1)*n/R])
			} else {
				got = []int{cpus[i%n]}
			}
			t.Ranks[r].CPUs = got
			t.Ranks[r].NUMA = NodeOf(t.Hosts[t.Ranks[r].Host].Nodes, got)
			if r == self {
				mine = got
			}
		}
	}
	return mine
}

// unbound returns the CPUs every one of ranks may run on when they are
// the same for all, at least two, and the ranks are processes of their
// own (known and different process ids); nil otherwise: someone bound
// them, or a process holds several ranks and cannot be bound for one.
func (t *Topology) unbound(ranks []int) []int {
	first := t.Ranks[ranks[0]].CPUs
	if len(first) < 2 {
		return nil
	}
	pids := map[int]bool{}
	for _, r := range ranks {
		rk := t.Ranks[r]
		if !slices.Equal(rk.CPUs, first) || rk.PID == 0 || pids[rk.PID] {
			return nil
		}
		pids[rk.PID] = true
	}
	return slices.Sorted(slices.Values(first))
}
