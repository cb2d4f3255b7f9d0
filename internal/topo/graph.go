package topo

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Topology is the job's graph as every rank holds it: each rank's host,
// NUMA node and CPUs, each host's ranks, nodes and NICs, and the groups
// (racks, switches) hosts belong to.
type Topology struct {
	// Source says where the placement came from: "discovery" or the
	// topology file.
	Source string
	Ranks  []Rank
	Hosts  []Host
	// Groups names the rack/switch groups Host.Group indexes.
	Groups []string
	// Links are link speeds a topology file gave (0 = not given).
	Links Links
}

// Rank is one rank's place.
type Rank struct {
	Host  int // index into Topology.Hosts
	Local int // index of the rank among its host's ranks
	NUMA  int // -1 when unknown or spanning nodes
	CPUs  []int
	PID   int // the rank's process id, 0 when unknown
}

// Host is one host of the job.
type Host struct {
	Name  string // the file's name for it, else the rank's host identity
	Group int    // index into Topology.Groups, -1 for none
	Ranks []int  // ascending
	Nodes []Node
	NICs  []NIC
	// DataNIC is the interface the host's lowest rank sends data on.
	DataNIC string
	// Machine is the kernel boot id of the host's lowest rank ("" when
	// unknown). Hosts are memory and network domains (HostID: host name,
	// network namespace, boot id); network namespaces or containers of one
	// machine are hosts of their own that share its kernel and CPUs
	// (SharedMachines).
	Machine string
}

// Links are the speeds of the link classes in Gbit/s; 0 means unknown.
type Links struct {
	Intra float64 // between ranks of one host
	Inter float64 // between hosts
	Group float64 // between hosts of one group, when faster than Inter
}

// Build joins the ranks' cards, and the topology file every rank read
// (nil for none), into the job's topology. It is a pure function of its
// arguments, so every rank that exchanged the same cards gets the same
// topology or the same error.
func Build(cards []Card, f *File) (*Topology, error) {
	if len(cards) == 0 {
		return nil, errorf("discovery", "no ranks")
	}
	for r, c := range cards {
		if c.File != cards[0].File {
			return nil, errorf("discovery", "ranks 0 and %d read different topology files (%s and %s)", r, orNone(cards[0].File), orNone(c.File))
		}
		if c.Host == "" {
			return nil, errorf("discovery", "rank %d has no host identity", r)
		}
	}
	t := &Topology{Source: "discovery", Ranks: make([]Rank, len(cards))}
	if f != nil {
		if err := t.place(cards, f); err != nil {
			return nil, err
		}
	} else {
		byHost := map[string]int{}
		for r, c := range cards {
			h, ok := byHost[c.Host]
			if !ok {
				h = len(t.Hosts)
				byHost[c.Host] = h
				t.Hosts = append(t.Hosts, Host{Name: c.Host, Group: -1})
			}
			t.Hosts[h].Ranks = append(t.Hosts[h].Ranks, r)
		}
	}
	for h := range t.Hosts {
		host := &t.Hosts[h]
		first := cards[host.Ranks[0]]
		host.Nodes, host.NICs, host.DataNIC, host.Machine = first.Nodes, first.NICs, first.DataNIC, first.Machine
		for i, r := range host.Ranks {
			t.Ranks[r] = Rank{Host: h, Local: i, NUMA: cards[r].NUMA, CPUs: cards[r].CPUs, PID: cards[r].PID}
		}
	}
	return t, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// place assigns ranks to hosts as f says, after checking f against the
// cards: every rank exactly once, ranks sharing a host in the file sharing
// one in reality and the other way round, host names and NICs that exist.
func (t *Topology) place(cards []Card, f *File) error {
	src := f.Source
	if src == "" {
		src = "topology file"
	}
	t.Source, t.Links = src, f.Links
	n := len(cards)
	where := make([]int, n)
	for i := range where {
		where[i] = -1
	}
	// Names some rank of the job answers to: a file host with one of
	// them must be that rank's host; other names are labels.
	known := map[string]bool{}
	for _, c := range cards {
		for _, name := range identities(c) {
			known[name] = true
		}
	}
	groups := map[string]int{}
	for h, fh := range f.Hosts {
		g := -1
		if fh.Group != "" {
			var ok bool
			if g, ok = groups[fh.Group]; !ok {
				g = len(t.Groups)
				groups[fh.Group] = g
				t.Groups = append(t.Groups, fh.Group)
			}
		}
		host := Host{Name: fh.Name, Group: g}
		for _, r := range fh.Ranks {
			if r < 0 || r >= n {
				return errorf(src, "host %s lists rank %d but the job has %d ranks", fh.Name, r, n)
			}
			if where[r] >= 0 {
				return errorf(src, "rank %d is listed twice (hosts %s and %s)", r, f.Hosts[where[r]].Name, fh.Name)
			}
			where[r] = h
			c := cards[r]
			if known[fh.Name] && !slices.Contains(identities(c), fh.Name) {
				return errorf(src, "rank %d is placed on host %s but runs on %s", r, fh.Name, describeHost(c))
			}
			// A rank table's device_ip is the accelerator NIC's address
			// in HCCL's clusters, not one of the host's: it places
			// nothing and is not held against the host's addresses.
			for _, nic := range fh.NICs {
				if len(c.NICs) > 0 && !slices.ContainsFunc(c.NICs, func(x NIC) bool { return x.Name == nic }) {
					return errorf(src, "host %s names NIC %q, which rank %d's host %s does not have", fh.Name, nic, r, describeHost(c))
				}
			}
			host.Ranks = append(host.Ranks, r)
		}
		slices.Sort(host.Ranks)
		if len(host.Ranks) == 0 {
			continue
		}
		t.Hosts = append(t.Hosts, host)
	}
	// A file that names some hosts as the ranks know them must name
	// them all so: a name no rank answers to is then a host that is not
	// in the job (or a typo), not a label. A file of labels only (a rank
	// table whose server_id is the address of a container's host, say)
	// places ranks by its grouping alone.
	if slices.ContainsFunc(f.Hosts, func(fh FileHost) bool { return known[fh.Name] }) {
		for _, fh := range f.Hosts {
			if !known[fh.Name] {
				return errorf(src, "host %s is not a host of this job: no rank runs on a host of that name or address (hosts are %s)",
					fh.Name, strings.Join(jobHosts(cards), ", "))
			}
		}
	}
	var missing []int
	for r, h := range where {
		if h < 0 {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return errorf(src, "the job has %d ranks but the file places %d (missing ranks %s)", n, n-len(missing), FormatCPUList(missing))
	}
	// The file and reality must agree on who shares a host.
	first := map[string]int{}
	for r, c := range cards {
		if r0, ok := first[c.Host]; ok && where[r0] != where[r] {
			return errorf(src, "ranks %d and %d run on one host (%s) but the file places them on %s and %s",
				r0, r, describeHost(c), f.Hosts[where[r0]].Name, f.Hosts[where[r]].Name)
		} else if !ok {
			first[c.Host] = r
		}
	}
	for _, h := range t.Hosts {
		for _, r := range h.Ranks[1:] {
			if cards[r].Host != cards[h.Ranks[0]].Host {
				return errorf(src, "ranks %d and %d are placed on host %s but run on different hosts (%s and %s)",
					h.Ranks[0], r, h.Name, describeHost(cards[h.Ranks[0]]), describeHost(cards[r]))
			}
		}
	}
	// Hosts in order of their lowest rank, so ring orders are stable.
	slices.SortStableFunc(t.Hosts, func(a, b Host) int { return cmp.Compare(a.Ranks[0], b.Ranks[0]) })
	return nil
}

// identities are the names a rank's host answers to.
func identities(c Card) []string {
	ids := []string{c.Host, shortHost(c.Host)}
	if c.Hostname != "" {
		ids = append(ids, c.Hostname)
	}
	return append(ids, c.Addrs...)
}

// jobHosts names the job's hosts as the ranks know them, in order of
// their lowest rank, at most 8.
func jobHosts(cards []Card) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range cards {
		if !seen[c.Host] {
			seen[c.Host] = true
			out = append(out, shortHost(c.Host))
		}
	}
	if len(out) > 8 {
		out = append(out[:8], fmt.Sprintf("and %d more", len(out)-8))
	}
	return out
}

func describeHost(c Card) string {
	if c.Hostname != "" && c.Hostname != c.Host && c.Hostname != shortHost(c.Host) {
		return c.Host + " (hostname " + c.Hostname + ")"
	}
	return c.Host
}

// InterGbps returns the speed of the links between hosts in Gbit/s: the
// file's, else the slowest data NIC of any host, else 0 (unknown).
func (t *Topology) InterGbps() float64 {
	if t.Links.Inter > 0 {
		return t.Links.Inter
	}
	slowest := 0
	for _, h := range t.Hosts {
		for _, nic := range h.NICs {
			if nic.Name == h.DataNIC && nic.SpeedMbps > 0 && (slowest == 0 || nic.SpeedMbps < slowest) {
				slowest = nic.SpeedMbps
			}
		}
	}
	return float64(slowest) / 1000
}

// SharedMachines returns the groups of hosts (indexes into Hosts, in
// order) that run on one kernel — the same boot id — when there are any:
// network namespaces or containers of one machine, which the job treats as
// hosts of their own (each with its own network stack; shared memory only
// within one) but whose ranks share the machine's CPUs.
func (t *Topology) SharedMachines() [][]int {
	by := map[string][]int{}
	var order []string
	for h, host := range t.Hosts {
		if host.Machine == "" {
			continue
		}
		if _, ok := by[host.Machine]; !ok {
			order = append(order, host.Machine)
		}
		by[host.Machine] = append(by[host.Machine], h)
	}
	var out [][]int
	for _, m := range order {
		if len(by[m]) > 1 {
			out = append(out, by[m])
		}
	}
	return out
}

// Crowd returns the most ranks per CPU on any kernel of the job: the ranks
// of the hosts that share a kernel (SharedMachines; a host without a boot
// id is a kernel of its own) over the CPUs they may run on (the union of
// their affinity masks, which a cpuset or a binding restricts; the CPUs
// of the host's NUMA nodes for a rank whose mask is not known). A value
// above 1 means ranks of that kernel take turns on its CPUs, so messages
// they send at once do not overlap; 0 when no kernel's CPUs are known.
func (t *Topology) Crowd() float64 {
	ranks := map[string]int{}
	cpus := map[string]map[int]bool{}
	for h, host := range t.Hosts {
		k := host.Machine
		if k == "" {
			k = fmt.Sprintf("host %d", h)
		}
		ranks[k] += len(host.Ranks)
		if cpus[k] == nil {
			cpus[k] = map[int]bool{}
		}
		for _, r := range host.Ranks {
			allowed := t.Ranks[r].CPUs
			if len(allowed) == 0 {
				for _, n := range host.Nodes {
					allowed = append(allowed, n.CPUs...)
				}
			}
			for _, c := range allowed {
				cpus[k][c] = true
			}
		}
	}
	most := 0.0
	for k, n := range ranks {
		if c := len(cpus[k]); c > 0 {
			most = max(most, float64(n)/float64(c))
		}
	}
	return most
}

// Size returns the number of ranks.
func (t *Topology) Size() int { return len(t.Ranks) }

// Level returns the class of link between ranks a and b.
func (t *Topology) Level(a, b int) Level {
	ra, rb := t.Ranks[a], t.Ranks[b]
	switch {
	case a == b:
		return Self
	case ra.Host == rb.Host && ra.NUMA >= 0 && ra.NUMA == rb.NUMA:
		return SameNUMA
	case ra.Host == rb.Host:
		return SameHost
	case t.Hosts[ra.Host].Group >= 0 && t.Hosts[ra.Host].Group == t.Hosts[rb.Host].Group:
		return SameGroup
	}
	return Remote
}

// HostRanks returns each host's ranks in ring order (NUMA node, then rank),
// hosts ordered by group and then by their lowest rank.
func (t *Topology) HostRanks() [][]int {
	hosts := make([]int, len(t.Hosts))
	for i := range hosts {
		hosts[i] = i
	}
	slices.SortStableFunc(hosts, func(a, b int) int {
		ga, gb := t.Hosts[a].Group, t.Hosts[b].Group
		if ga < 0 {
			ga = len(t.Groups)
		}
		if gb < 0 {
			gb = len(t.Groups)
		}
		return cmp.Compare(ga, gb)
	})
	out := make([][]int, len(hosts))
	for i, h := range hosts {
		rs := slices.Clone(t.Hosts[h].Ranks)
		slices.SortStableFunc(rs, func(a, b int) int {
			na, nb := t.Ranks[a].NUMA, t.Ranks[b].NUMA
			if na < 0 {
				na = 1 << 30
			}
			if nb < 0 {
				nb = 1 << 30
			}
			return cmp.Compare(na, nb)
		})
		out[i] = rs
	}
	t.leadersApart(hosts, out)
	return out
}

// leadersApart rotates the rank lists of hosts that share a kernel so
// that their first ranks — the ones the leader forms (leader, hier) send
// between hosts through, and rail 0 — are bound to different CPUs when
// the ranks' affinity masks say so (hcomm run --bind-to core, taskset, a
// cpuset). Two hosts' first ranks on one CPU do their network-stack work
// for every message between the hosts by turns: measured on 2 namespaces
// × 2 ranks of a 2-CPU machine, an 8-byte AllReduce took 34–39 µs with
// the two leaders on one CPU and 21–23 µs with them apart. A rotation
// keeps each host's cyclic order (and so its ring); ranks that may run on
// every CPU of the machine are left as they are, since the kernel places
// them.
func (t *Topology) leadersApart(hosts []int, out [][]int) {
	used := map[string]map[int]bool{} // per machine: CPUs of the leaders so far
	for i, h := range hosts {
		m := t.Hosts[h].Machine
		if m == "" || len(out[i]) < 2 {
			continue
		}
		if used[m] == nil {
			used[m] = map[int]bool{}
		}
		free := func(r int) bool {
			cpus := t.Ranks[r].CPUs
			if len(cpus) == 0 {
				return false
			}
			for _, c := range cpus {
				if used[m][c] {
					return false
				}
			}
			return true
		}
		if k := slices.IndexFunc(out[i], free); k > 0 {
			out[i] = append(out[i][k:], out[i][:k]...)
		}
		for _, c := range t.Ranks[out[i][0]].CPUs {
			used[m][c] = true
		}
	}
}

// RingOrder returns a ring through every rank that enters and leaves each
// host once (and each group once), staying inside a NUMA node as long as
// it can: the concatenation of HostRanks.
func (t *Topology) RingOrder() []int {
	var out []int
	for _, rs := range t.HostRanks() {
		out = append(out, rs...)
	}
	return out
}

// Flat reports whether the topology has nothing to exploit: one host, or
// one rank per host with no groups.
func (t *Topology) Flat() bool {
	return len(t.Hosts) == 1 || (len(t.Hosts) == len(t.Ranks) && len(t.Groups) == 0)
}

// Crossings counts the edges of the ring order (of len(order) ranks, order
// closing back on its first) that join different hosts.
func (t *Topology) Crossings(order []int) int {
	n := 0
	for i, r := range order {
		if t.Ranks[r].Host != t.Ranks[order[(i+1)%len(order)]].Host {
			n++
		}
	}
	return n
}

// Format writes a text description of the topology: hosts with their
// groups, nodes, NICs and ranks, then the ring order.
func (t *Topology) Format(w io.Writer) {
	fmt.Fprintf(w, "topology: %s on %s", plural(len(t.Ranks), "rank"), plural(len(t.Hosts), "host"))
	if len(t.Groups) > 0 {
		fmt.Fprintf(w, " in %d groups", len(t.Groups))
	}
	fmt.Fprintf(w, " (from %s)\n", t.Source)
	if t.Links != (Links{}) {
		fmt.Fprintf(w, "links: intra-host %s, inter-host %s, within a group %s\n",
			gbps(t.Links.Intra), gbps(t.Links.Inter), gbps(t.Links.Group))
	}
	for _, rs := range t.HostRanks() {
		h := t.Hosts[t.Ranks[rs[0]].Host]
		fmt.Fprintf(w, "host %s", h.Name)
		if h.Group >= 0 {
			fmt.Fprintf(w, " group %s", t.Groups[h.Group])
		}
		fmt.Fprintf(w, ": ranks %s\n", FormatCPUList(h.Ranks))
		for _, n := range h.Nodes {
			fmt.Fprintf(w, "  numa %d: cpus %s\n", n.ID, FormatCPUList(n.CPUs))
		}
		for _, nic := range h.NICs {
			state := "down"
			if nic.Up {
				state = "up"
			}
			speed := "?"
			if nic.SpeedMbps > 0 {
				speed = fmt.Sprintf("%d Mb/s", nic.SpeedMbps)
			}
			numa := "-"
			if nic.NUMA >= 0 {
				numa = fmt.Sprint(nic.NUMA)
			}
			mark := ""
			if nic.Name == h.DataNIC {
				mark = " (data)"
			}
			fmt.Fprintf(w, "  nic %s: %s, mtu %d, numa %s, %s%s\n", nic.Name, speed, nic.MTU, numa, state, mark)
		}
		for _, r := range rs {
			rk := t.Ranks[r]
			numa := "-"
			if rk.NUMA >= 0 {
				numa = fmt.Sprint(rk.NUMA)
			}
			fmt.Fprintf(w, "  rank %d: local %d, numa %s, cpus %s\n", r, rk.Local, numa, FormatCPUList(rk.CPUs))
		}
	}
	for _, hs := range t.SharedMachines() {
		names := make([]string, len(hs))
		ranks := 0
		for i, h := range hs {
			names[i] = t.Hosts[h].Name
			ranks += len(t.Hosts[h].Ranks)
		}
		m := t.Hosts[hs[0]].Machine
		fmt.Fprintf(w, "hosts %s share one kernel (boot id %.8s): namespaces or containers of one machine, %d ranks on its CPUs\n",
			strings.Join(names, ", "), m, ranks)
	}
	ring := t.RingOrder()
	fmt.Fprintf(w, "ring: %s (%d host crossings; rank order crosses %d)\n", joinInts(ring, " "), t.Crossings(ring), t.Crossings(identity(len(ring))))
}

// plural returns "1 rank", "2 ranks".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func gbps(v float64) string {
	if v <= 0 {
		return "?"
	}
	return fmt.Sprintf("%g Gb/s", v)
}

func joinInts(v []int, sep string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, sep)
}

func identity(n int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = i
	}
	return o
}
