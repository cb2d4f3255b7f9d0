package topo

import (
	"fmt"
	"slices"
	"strings"
)

// Binding policies of `hcomm run --bind-to`, with mpirun's names.
const (
	BindNone = "none" // leave the rank where the launcher runs
	BindCore = "core" // one CPU per local rank
	BindNUMA = "numa" // the CPUs of one NUMA node per local rank
)

// Overload is mpirun's binding qualifier that lets more ranks be bound to
// a CPU (core) or to a NUMA node (numa) than it has CPUs:
// --bind-to core:overload-allowed.
const Overload = "overload-allowed"

// Bind returns the CPUs local rank local of localSize ranks on machine m
// should be bound to under policy, given the CPUs the launcher may use
// (allowed); nil means no binding (none, and auto, which binds at Init
// only where hosts share a machine: Topology.SpreadShared). core deals the allowed CPUs out in
// order, one per local rank; numa spreads the local ranks evenly over the
// NUMA nodes that hold allowed CPUs, consecutive local ranks on the same
// node, and binds each to its node's allowed CPUs. A machine without NUMA
// information is one node.
//
// As mpirun does, Bind refuses to bind more ranks to a CPU (core) or a
// node (numa) than it has CPUs, which would make the bound ranks take
// turns on a CPU while others of the host may sit idle: more local ranks
// than allowed CPUs is an error unless the policy carries the qualifier
// Overload ("core:overload-allowed"), with which core wraps around the
// CPUs (local rank i on CPU i mod CPUs) and numa binds the node's ranks
// to its CPUs all the same. auto leaves such hosts unbound (mpirun's
// default does not bind an oversubscribed node either).
func Bind(policy string, m Machine, allowed []int, local, localSize int) ([]int, error) {
	if local < 0 || localSize < 1 || local >= localSize {
		return nil, fmt.Errorf("topo: local rank %d of %d", local, localSize)
	}
	base, qual, qualified := strings.Cut(policy, ":")
	if qualified && (qual != Overload || (base != BindCore && base != BindNUMA)) {
		return nil, fmt.Errorf("topo: --bind-to %q: want auto, none, core or numa (core and numa may end in :%s)", policy, Overload)
	}
	overloaded := func(ranks, cpus int) error {
		if ranks <= cpus || qualified {
			return nil
		}
		return fmt.Errorf("topo: --bind-to %s: %d local ranks on %d CPUs would share CPUs (as mpirun, hcomm refuses); --bind-to %s:%s binds them anyway, auto or none leaves them to the kernel", base, ranks, cpus, base, Overload)
	}
	switch base {
	case "", BindNone, BindAuto:
		return nil, nil
	case BindCore:
		if len(allowed) == 0 {
			return nil, fmt.Errorf("topo: --bind-to core: no CPUs allowed")
		}
		if err := overloaded(localSize, len(allowed)); err != nil {
			return nil, err
		}
		a := slices.Sorted(slices.Values(allowed))
		return []int{a[local%len(a)]}, nil
	case BindNUMA:
		var nodes [][]int
		for _, n := range m.Nodes {
			if cpus := intersect(n.CPUs, allowed); len(cpus) > 0 {
				nodes = append(nodes, cpus)
			}
		}
		if len(nodes) == 0 {
			if len(allowed) == 0 {
				return nil, fmt.Errorf("topo: --bind-to numa: no CPUs allowed")
			}
			nodes = [][]int{slices.Sorted(slices.Values(allowed))}
		}
		node := local * len(nodes) / localSize
		on := 0 // the local ranks bound to node
		for l := range localSize {
			if l*len(nodes)/localSize == node {
				on++
			}
		}
		if err := overloaded(on, len(nodes[node])); err != nil {
			return nil, err
		}
		return nodes[node], nil
	}
	return nil, fmt.Errorf("topo: --bind-to %q: want auto, none, core or numa", policy)
}

// Poll says where a rank's polling goroutines run: HCOMM_CPU_AFFINITY.
type Poll struct {
	// Mode is "auto", "off", "nic" or "list".
	Mode string
	// CPUs is the list of Mode "list".
	CPUs []int
}

// ParsePoll parses HCOMM_CPU_AFFINITY: auto (the default: pin the polling
// goroutines to the rank's CPUs when the rank is bound to fewer than all
// of them), off (never pin), nic (the CPUs of the data NIC's NUMA node
// among the rank's) or a CPU list ("0-3,8").
func ParsePoll(s string) (Poll, error) {
	switch t := strings.ToLower(strings.TrimSpace(s)); t {
	case "", "auto":
		return Poll{Mode: "auto"}, nil
	case "off", "none", "0":
		return Poll{Mode: "off"}, nil
	case "nic":
		return Poll{Mode: "nic"}, nil
	}
	cpus, err := ParseCPUList(s)
	if err != nil {
		return Poll{}, fmt.Errorf("want auto, off, nic or a CPU list: %w", err)
	}
	if len(cpus) == 0 {
		return Poll{}, fmt.Errorf("want auto, off, nic or a CPU list")
	}
	return Poll{Mode: "list", CPUs: cpus}, nil
}

func (p Poll) String() string {
	if p.Mode == "list" {
		return FormatCPUList(p.CPUs)
	}
	if p.Mode == "" {
		return "auto"
	}
	return p.Mode
}

// PollCPUs returns the CPUs the polling goroutines of the rank that card c
// describes are pinned to under p, or nil for none. Under auto a rank that
// may run on every CPU of its machine (or whose machine is unknown) pins
// nothing, so that an unbound job pays nothing; a bound rank pins to its
// CPUs on the data NIC's node if it has any there, else to all of its
// CPUs. nic pins to the rank's CPUs on the data NIC's node (all of its
// CPUs when the node is unknown or the rank has none there). A list must
// lie within the rank's CPUs.
func (p Poll) PollCPUs(c Card) ([]int, error) {
	near := func() []int {
		node := -1
		for _, nic := range c.NICs {
			if nic.Name == c.DataNIC {
				node = nic.NUMA
			}
		}
		for _, n := range c.Nodes {
			if n.ID == node && node >= 0 {
				if cpus := intersect(n.CPUs, c.CPUs); len(cpus) > 0 {
					return cpus
				}
			}
		}
		return slices.Clone(c.CPUs)
	}
	switch p.Mode {
	case "off":
		return nil, nil
	case "", "auto":
		var all []int
		for _, n := range c.Nodes {
			all = append(all, n.CPUs...)
		}
		if len(all) == 0 || len(c.CPUs) == 0 || len(intersect(all, c.CPUs)) == len(all) {
			return nil, nil
		}
		return near(), nil
	case "nic":
		if len(c.CPUs) == 0 {
			return nil, nil
		}
		return near(), nil
	case "list":
		if len(c.CPUs) > 0 {
			if out := intersect(p.CPUs, c.CPUs); len(out) != len(p.CPUs) {
				return nil, fmt.Errorf("HCOMM_CPU_AFFINITY=%s: the rank may run only on CPUs %s", FormatCPUList(p.CPUs), FormatCPUList(c.CPUs))
			}
		}
		return slices.Clone(p.CPUs), nil
	}
	return nil, fmt.Errorf("HCOMM_CPU_AFFINITY mode %q", p.Mode)
}

// intersect returns the sorted CPUs in both a and b.
func intersect(a, b []int) []int {
	var out []int
	for _, c := range a {
		if slices.Contains(b, c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
