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
// seconds per byte reduced.
type LinkCosts struct {
	Intra, Inter Link
	Gamma        float64
}

// LayoutCost estimates the time of algorithm name of collective c on layout
// l for a vector of bytes bytes, in the α–β–γ model per link class:
// AllReduce "ring" (in rank order), "hring" and "hier", Broadcast and
// Barrier "hier". A ring step costs what its slowest edge
// costs; an edge between hosts shares its host's NIC with the host's other
// edges leaving it in the same step. It returns +Inf for other names.
func LayoutCost(c sched.Coll, name string, l Layout, bytes float64, lc LinkCosts) float64 {
	n := len(l.Order())
	H := len(l.Hosts)
	L := 0
	for _, rs := range l.Hosts {
		L = max(L, len(rs))
	}
	if n <= 1 {
		return 0
	}
	ringStep := func(order []int, m float64) float64 {
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
			return lc.Intra.Alpha + lc.Intra.Beta*m
		}
		return max(lc.Inter.Alpha+float64(share)*lc.Inter.Beta*m, lc.Intra.Alpha+lc.Intra.Beta*m)
	}
	reduce := lc.Gamma * bytes * float64(n-1) / float64(n)
	lg := func(k int) float64 { return math.Ceil(math.Log2(float64(k))) }
	switch c {
	case sched.Barrier:
		if name != "hier" {
			return math.Inf(1)
		}
		intra := 0.0
		if L > 1 {
			intra = 2 * lc.Intra.Alpha
		}
		return intra + lg(H)*lc.Inter.Alpha
	case sched.Broadcast:
		if name != "hier" {
			return math.Inf(1)
		}
		return lg(H)*(lc.Inter.Alpha+lc.Inter.Beta*bytes) + lg(L)*(lc.Intra.Alpha+lc.Intra.Beta*bytes)
	case sched.AllReduce:
	default:
		return math.Inf(1)
	}
	switch name {
	case "ring":
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		return 2*float64(n-1)*ringStep(order, bytes/float64(n)) + reduce
	case "hring":
		return 2*float64(n-1)*ringStep(l.Order(), bytes/float64(n)) + reduce
	case "hier":
		intra := 2 * float64(L-1) * (lc.Intra.Alpha + lc.Intra.Beta*bytes/float64(L))
		// Every rank of a host sends its 1/L share at once through the
		// host's NIC: per step the NIC moves bytes/H.
		inter := 2 * float64(H-1) * (lc.Inter.Alpha + lc.Inter.Beta*bytes/float64(H))
		return intra + inter + reduce + lc.Gamma*bytes*float64(H-1)/float64(H)/float64(L)
	}
	return math.Inf(1)
}

// ChooseAllReduce returns the cheapest AllReduce for layout l and a vector
// of bytes bytes among the flat ring and the layout algorithms, by
// LayoutCost.
func ChooseAllReduce(l Layout, bytes float64, lc LinkCosts) string {
	best, cost := "ring", LayoutCost(sched.AllReduce, "ring", l, bytes, lc)
	for _, name := range []string{"hring", "hier"} {
		if c := LayoutCost(sched.AllReduce, name, l, bytes, lc); c < cost {
			best, cost = name, c
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
