package algo

import (
	"math"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// Link is the α–β cost of one class of link: Alpha seconds per message,
// Beta seconds per byte.
type Link struct{ Alpha, Beta float64 }

// LinkCosts are the link classes a layout's algorithms are costed with:
// Intra between ranks of one host, Inter between hosts (the host's NIC,
// shared by every rank of the host that sends across at once), and Gamma
// seconds per byte reduced. Crowd is the most ranks per CPU on a kernel
// of the layout (topo.Topology.Crowd: hosts that are network namespaces
// of one machine share its CPUs); 0 or at most 1 means every rank has a
// CPU of its own.
type LinkCosts struct {
	Intra, Inter Link
	Gamma        float64
	Crowd        float64
}

// The cost functions of the layout algorithms (Algorithm.LinkCost) follow,
// in the α–β–γ model per link class. A ring step costs what its slowest
// edge costs; an edge between hosts shares its host's NIC with the host's
// other edges leaving it in the same step: the messages leaving a host in
// one step take turns there, each for its whole α + β·len (α being the
// per-message work of the host's network stack), as
// sched.CriticalPathHosts prices the flat algorithms. bytes is a rank's vector for
// AllReduce, Reduce and Broadcast and the total of the blocks for
// AllGather and ReduceScatter.

// shape returns the ranks, hosts, and the most and fewest ranks on a host.
func (l Layout) shape() (n, H, Lmax, Lmin int) {
	H = len(l.Hosts)
	Lmin = math.MaxInt
	for _, rs := range l.Hosts {
		n += len(rs)
		Lmax, Lmin = max(Lmax, len(rs)), min(Lmin, len(rs))
	}
	return
}

func lg(k int) float64 { return math.Ceil(math.Log2(float64(k))) }

func (lk Link) time(bytes float64) float64 { return lk.Alpha + lk.Beta*bytes }

// railInter is the time of a step of the rail forms, in which w ranks of
// each host send a message of m bytes to another host at once, one each.
// The bytes take turns on the host's NIC. The per-message work (α: the
// network stacks of both ends, the wake-ups) overlaps when each rank has
// a CPU of its own; on a crowded kernel (Crowd > 1) the w messages' work
// shares its CPUs and stretches by up to w.
func (lc LinkCosts) railInter(w int, m float64) float64 {
	f := min(max(lc.Crowd, 1), float64(w))
	return f*lc.Inter.Alpha + float64(w)*lc.Inter.Beta*m
}

// ringStep is the time of one step of a ring in order moving m bytes on
// every edge.
func (l Layout) ringStep(order []int, m float64, lc LinkCosts) float64 {
	host := map[int]int{}
	for h, rs := range l.Hosts {
		for _, r := range rs {
			host[r] = h
		}
	}
	leaving := map[int]int{}
	for i, r := range order {
		if host[r] != host[order[(i+1)%len(order)]] {
			leaving[host[r]]++
		}
	}
	share := 0
	for _, k := range leaving {
		share = max(share, k)
	}
	if share == 0 {
		return lc.Intra.time(m)
	}
	return max(float64(share)*lc.Inter.time(m), lc.Intra.time(m))
}

// FlatRingCost is the cost of the flat AllReduce ring, in rank order, on
// layout l: what the planner charges the flat ring once it knows the
// hosts.
func FlatRingCost(l Layout, bytes float64, lc LinkCosts) float64 {
	n, _, _, _ := l.shape()
	if n <= 1 {
		return 0
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	return 2*float64(n-1)*l.ringStep(order, bytes/float64(n), lc) + lc.Gamma*bytes*float64(n-1)/float64(n)
}

func hringAllReduceCost(l Layout, bytes float64, lc LinkCosts) float64 {
	n, _, _, _ := l.shape()
	return 2*float64(n-1)*l.ringStep(l.Order(), bytes/float64(n), lc) + lc.Gamma*bytes*float64(n-1)/float64(n)
}

func hierAllReduceCost(l Layout, bytes float64, lc LinkCosts) float64 {
	n, H, L, _ := l.shape()
	intra := 2 * float64(L-1) * lc.Intra.time(bytes/float64(L))
	// Every rank of a host sends its 1/L share at once through the host's
	// NIC: per step the NIC moves bytes/H in L messages.
	inter := 2 * float64(H-1) * (float64(L)*lc.Inter.Alpha + lc.Inter.Beta*bytes/float64(H))
	return intra + inter + lc.Gamma*bytes*float64(n-1)/float64(n) + lc.Gamma*bytes*float64(H-1)/float64(H)/float64(L)
}

func leaderAllReduceCost(l Layout, bytes float64, lc LinkCosts) float64 {
	_, H, L, _ := l.shape()
	// Recursive doubling among the leaders: ⌊log2 H⌋ exchanges, and the
	// fold's two messages when H is not a power of two.
	rounds, fold := float64(floorLog2(H)), 0.0
	if H&(H-1) != 0 {
		fold = 1
	}
	return 2*lg(L)*lc.Intra.time(bytes) + (rounds+2*fold)*lc.Inter.time(bytes) + lc.Gamma*bytes*(lg(L)+rounds+fold)
}

func hierReduceCost(l Layout, bytes float64, lc LinkCosts) float64 {
	_, H, L, _ := l.shape()
	return lg(L)*lc.Intra.time(bytes) + lg(H)*lc.Inter.time(bytes) + lc.Gamma*bytes*(lg(L)+lg(H))
}

func hierBroadcastCost(l Layout, bytes float64, lc LinkCosts) float64 {
	_, H, L, _ := l.shape()
	return lg(H)*lc.Inter.time(bytes) + lg(L)*lc.Intra.time(bytes)
}

func hierBarrierCost(l Layout, _ float64, lc LinkCosts) float64 {
	_, H, L, _ := l.shape()
	intra := 0.0
	if L > 1 {
		intra = 2 * lc.Intra.Alpha
	}
	return intra + lg(H)*lc.Inter.Alpha
}

func hringAllGatherCost(l Layout, bytes float64, lc LinkCosts) float64 {
	n, _, _, _ := l.shape()
	return float64(n-1) * l.ringStep(l.Order(), bytes/float64(n), lc)
}

func hringReduceScatterCost(l Layout, bytes float64, lc LinkCosts) float64 {
	n, _, _, _ := l.shape()
	return hringAllGatherCost(l, bytes, lc) + lc.Gamma*bytes*float64(n-1)/float64(n)
}

// railSteps returns the steps of the multi-rail AllGather's phases: the
// inter-host ring steps of the busiest rank (a proxy carries several
// rails), and the intra-host steps of the busiest host (a step per block
// of a composite, L−1 rounds).
func (l Layout) railSteps() (inter, intra float64) {
	_, H, R, Lmin := l.shape()
	if H > 1 {
		inter = float64((R+Lmin-1)/Lmin) * float64(H-1)
	}
	for h, rs := range l.Hosts {
		most := 0
		for i := range rs {
			most = max(most, len(l.composite(h, i)))
		}
		intra = max(intra, float64((len(rs)-1)*most))
	}
	return inter, intra
}

func hierAllGatherCost(l Layout, bytes float64, lc LinkCosts) float64 {
	n, _, R, _ := l.shape()
	block := bytes / float64(n)
	inter, intra := l.railSteps()
	// Per inter-host step a host's NIC carries one block of each of its
	// R rails at most, each a message.
	return inter*float64(R)*lc.Inter.time(block) + intra*lc.Intra.time(block)
}

func hierReduceScatterCost(l Layout, bytes float64, lc LinkCosts) float64 {
	n, _, _, _ := l.shape()
	inter, intra := l.railSteps()
	return hierAllGatherCost(l, bytes, lc) + lc.Gamma*(inter+intra)*bytes/float64(n)
}

// pipeReduceScatterCost prices pipe, hier cut into pipeChunks parts laid
// over each other (pipeReduceScatter). The host's NIC carries the same
// bytes as under hier, but only the first part's messages start on an
// idle link. hier's R messages of a step all start at once, before any of
// their bytes is on the link, and take turns for their whole α + β·len;
// a later part's messages are sent while the earlier parts' bytes still
// drain from the NIC's queue, so their per-message work overlaps those
// bytes, and such a part costs only its bytes — where those take at least
// α on the link (Crowd times α on a crowded kernel, whose CPUs also drain
// the bytes); otherwise it costs what the first does. Of the intra-host
// phase and the reductions only the first part's intra-host phase and the
// last part's reduction are not hidden behind the link. So pipe costs
// about what hier costs less its intra-host phase where a part's messages
// are long beside α, and more (every part's α exposed) where they are
// short. On 2 × 2 namespaces of one machine (Crowd 2) it is the pick from
// 128 KiB over 1 Gbit/s, where it was measured (BENCHMARKS.md, under
// load) at the link's speed in 37 of 40 jobs at 128–256 KiB while hier,
// leader and recursive halving lost 10–80% in most rounds, and slower than
// leader at 32–64 KiB; over 10 Gbit/s from 4 MiB (at 1 MiB, parts of 64
// KiB, it measured slower than hier there). On one host or hosts of
// unequal sizes pipe builds hier (pipeReduceScatter): +Inf, so that the
// planner names hier there.
func pipeReduceScatterCost(l Layout, bytes float64, lc LinkCosts) float64 {
	n, H, R, Lmin := l.shape()
	if H == 1 || R != Lmin {
		return math.Inf(1)
	}
	k := float64(pipeChunks)
	part := bytes / float64(n) / k
	inter, intra := l.railSteps()
	rails := float64(R) // messages per inter-host step leaving a host, at most
	// A part's intra-host phase (with its reductions) and inter-host
	// phase; in the steady state each step holds one of each, of
	// neighbouring parts.
	in := intra * (lc.Intra.time(part) + lc.Gamma*part)
	first := inter * rails * lc.Inter.time(part)
	later := first
	// On a crowded kernel (namespaces of one machine) the bytes drain
	// through the same CPUs the later part's stack work needs: that
	// work hides only behind bytes Crowd times as long.
	if lc.Inter.Beta*part >= max(lc.Crowd, 1)*lc.Inter.Alpha {
		later = inter * rails * lc.Inter.Beta * part
	}
	return in + first + (k-1)*max(later, in) + lc.Gamma*inter*part
}

// LayoutCost estimates the time of algorithm name of collective c on layout
// l for a call of bytes bytes: the LinkCost of the layout algorithm of that
// name, or for AllReduce "ring" the flat ring's (FlatRingCost). It returns
// +Inf for other names.
func LayoutCost(c sched.Coll, name string, l Layout, bytes float64, lc LinkCosts) float64 {
	if c == sched.AllReduce && name == "ring" {
		return FlatRingCost(l, bytes, lc)
	}
	for _, a := range ForLayout(l) {
		if a.Coll == c && a.Name == name {
			return a.LinkCost(bytes, lc)
		}
	}
	return math.Inf(1)
}

// ChooseAllReduce returns the cheapest AllReduce for layout l and a vector
// of bytes bytes among the flat ring and the layout algorithms, by their
// link costs.
func ChooseAllReduce(l Layout, bytes float64, lc LinkCosts) string {
	best, cost := "ring", FlatRingCost(l, bytes, lc)
	for _, a := range ForLayout(l) {
		if a.Coll != sched.AllReduce {
			continue
		}
		if c := a.LinkCost(bytes, lc); c < cost {
			best, cost = a.Name, c
		}
	}
	return best
}

// LayoutNames returns the names of the layout algorithms of collective c.
func LayoutNames(c sched.Coll) []string {
	var out []string
	for _, a := range ForLayout(FlatLayout(1)) {
		if a.Coll == c {
			out = append(out, a.Name)
		}
	}
	return out
}
