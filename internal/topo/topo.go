// Package topo knows the machine a job runs on: which host, NUMA node and
// CPUs each rank has, which NICs each host offers, and how hosts group into
// racks or switches. It reads the system (Probe, through an fs.FS rooted at
// "/" so that tests hand it fake sysfs trees), encodes one rank's view into a
// small card (Card.MarshalBinary) that the ranks exchange once through the
// store (Exchange), and joins the cards, and optionally a topology file (an
// HCCL rank table or hcomm's own format, see ParseRankTable and ParseFile),
// into a Topology every rank holds identically: rank → NUMA node → host →
// group.
//
// Parsing is pure and separate from reading: ParseCPUList, ParseNodes and
// the card and file decoders take bytes, never paths.
package topo

import (
	"fmt"
	"slices"
	"strings"
)

// NIC is one network interface as /sys/class/net describes it.
type NIC struct {
	Name string
	// SpeedMbps is the link speed in Mbit/s; 0 when unknown (virtual
	// devices report -1 or nothing).
	SpeedMbps int
	MTU       int
	// NUMA is the node of the device's PCI slot; -1 when unknown or
	// virtual.
	NUMA int
	Up   bool
}

// Node is one NUMA node of a machine and its CPUs.
type Node struct {
	ID   int
	CPUs []int
}

// Card is what one rank tells the others about itself.
type Card struct {
	// Host is the rank's host identity (ranks with equal Host share
	// memory); Hostname the machine's name; Machine its kernel boot id
	// (network namespaces of one machine share it).
	Host, Hostname, Machine string
	// Addrs are the IP addresses the rank can be reached at (the data
	// socket's first); a topology file may name a host by one of them.
	Addrs []string
	// NUMA is the node the rank's allowed CPUs all belong to, or -1 when
	// they span nodes or nothing is known.
	NUMA int
	// CPUs are the CPUs the rank may run on (sched_getaffinity).
	CPUs []int
	// Nodes are the machine's NUMA nodes.
	Nodes []Node
	// NICs are the host's network interfaces; DataNIC names the one the
	// data socket uses ("" when unknown).
	NICs    []NIC
	DataNIC string
	// File identifies the topology file the rank read (its digest), ""
	// for none: ranks that read different files are an error.
	File string
	// PID is the rank's process id (0 when unknown): ranks of one
	// process share its CPU affinity, so none of them is bound alone.
	PID int
}

// NodeOf returns the NUMA node every CPU of cpus belongs to, or -1 when
// they span nodes, some CPU is in no node, or cpus is empty.
func NodeOf(nodes []Node, cpus []int) int {
	found := -1
	for _, c := range cpus {
		id := -1
		for _, n := range nodes {
			if slices.Contains(n.CPUs, c) {
				id = n.ID
				break
			}
		}
		if id < 0 || (found >= 0 && id != found) {
			return -1
		}
		found = id
	}
	return found
}

// Level is a class of link between two ranks, from closest to farthest.
type Level uint8

const (
	Self      Level = iota
	SameNUMA        // same host, same NUMA node
	SameHost        // same host, different or unknown NUMA nodes
	SameGroup       // different hosts in one rack/switch group
	Remote          // different hosts, different or no groups
)

func (l Level) String() string {
	switch l {
	case Self:
		return "self"
	case SameNUMA:
		return "numa"
	case SameHost:
		return "host"
	case SameGroup:
		return "group"
	case Remote:
		return "net"
	}
	return fmt.Sprintf("level(%d)", uint8(l))
}

// Error is a topology that contradicts itself or the machine. Every rank
// computes the same Error from the same exchanged cards.
type Error struct {
	Source string // "rank table FILE", "topology file FILE" or "discovery"
	Msg    string
}

func (e *Error) Error() string {
	if e.Source == "discovery" {
		return "topology discovery: " + e.Msg
	}
	return e.Source + ": " + e.Msg
}

func errorf(src, format string, a ...any) error {
	return &Error{Source: src, Msg: fmt.Sprintf(format, a...)}
}

// shortHost returns the part of a host identity before the first "/"
// (HostID joins the name with namespace and boot id).
func shortHost(h string) string {
	name, _, _ := strings.Cut(h, "/")
	return name
}
