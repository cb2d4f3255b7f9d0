package topo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

// maxCPU bounds the CPU numbers a list may name, so that a corrupt or
// hostile list ("0-4000000000") cannot make ParseCPUList allocate without
// bound.
const maxCPU = 1 << 16

// ParseCPUList parses the kernel's CPU list format ("0-3,8,10-11", the
// format of cpulist files and of taskset -c) into sorted, distinct CPU
// numbers. An empty or all-space list is an empty set.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a >= maxCPU {
			return nil, fmt.Errorf("bad CPU list %q: %q is not a CPU number below %d", s, lo, maxCPU)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b >= maxCPU {
				return nil, fmt.Errorf("bad CPU list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
		if len(out) > maxCPU {
			return nil, fmt.Errorf("bad CPU list %q: more than %d CPUs", s, maxCPU)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// FormatCPUList formats CPU numbers in the kernel's list format, merging
// runs into ranges. cpus need not be sorted.
func FormatCPUList(cpus []int) string {
	c := slices.Clone(cpus)
	slices.Sort(c)
	c = slices.Compact(c)
	var b strings.Builder
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(c[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Machine is what one host's sysfs says about it.
type Machine struct {
	Hostname string
	BootID   string
	Nodes    []Node
	NICs     []NIC
}

// Probe reads the machine description from fsys, a file system rooted at
// "/" (os.DirFS("/") for the real machine, a fstest.MapFS in tests). Missing
// files are not errors: a machine without /sys/devices/system/node has one
// node holding every CPU of /sys/devices/system/cpu/online (or no node at
// all if that is missing too), and a NIC whose speed cannot be read has
// speed 0. Malformed contents are errors.
func Probe(fsys fs.FS) (Machine, error) {
	var m Machine
	m.Hostname = readTrim(fsys, "proc/sys/kernel/hostname")
	m.BootID = readTrim(fsys, "proc/sys/kernel/random/boot_id")
	nodes, err := probeNodes(fsys)
	if err != nil {
		return m, err
	}
	m.Nodes = nodes
	nics, err := probeNICs(fsys)
	if err != nil {
		return m, err
	}
	m.NICs = nics
	return m, nil
}

func readTrim(fsys fs.FS, name string) string {
	b, err := fs.ReadFile(fsys, name)
	if err != nil || len(b) > 1<<16 {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func probeNodes(fsys fs.FS) ([]Node, error) {
	const dir = "sys/devices/system/node"
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read /%s: %w", dir, err)
	}
	var nodes []Node
	for _, e := range ents {
		id, ok := strings.CutPrefix(e.Name(), "node")
		n, err := strconv.Atoi(id)
		if !ok || err != nil || n < 0 {
			continue
		}
		b, err := fs.ReadFile(fsys, dir+"/"+e.Name()+"/cpulist")
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("read /%s/%s/cpulist: %w", dir, e.Name(), err)
		}
		cpus, err := ParseCPUList(string(b))
		if err != nil {
			return nil, fmt.Errorf("/%s/%s/cpulist: %w", dir, e.Name(), err)
		}
		nodes = append(nodes, Node{ID: n, CPUs: cpus})
	}
	if len(nodes) == 0 {
		// No NUMA information (a kernel without CONFIG_NUMA, a
		// container hiding /sys): one node with every online CPU.
		b, err := fs.ReadFile(fsys, "sys/devices/system/cpu/online")
		if err != nil {
			return nil, nil
		}
		cpus, err := ParseCPUList(string(b))
		if err != nil {
			return nil, fmt.Errorf("/sys/devices/system/cpu/online: %w", err)
		}
		return []Node{{ID: 0, CPUs: cpus}}, nil
	}
	slices.SortFunc(nodes, func(a, b Node) int { return a.ID - b.ID })
	return nodes, nil
}

func probeNICs(fsys fs.FS) ([]NIC, error) {
	const dir = "sys/class/net"
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("read /%s: %w", dir, err)
	}
	var nics []NIC
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || name == "bonding_masters" {
			continue
		}
		p := dir + "/" + name + "/"
		nic := NIC{Name: name, NUMA: -1}
		// speed reads fail (EINVAL) on a link that is down; a
		// negative speed means unknown.
		if v, err := strconv.Atoi(readTrim(fsys, p+"speed")); err == nil && v > 0 {
			nic.SpeedMbps = v
		}
		if v, err := strconv.Atoi(readTrim(fsys, p+"mtu")); err == nil && v > 0 {
			nic.MTU = v
		}
		if v, err := strconv.Atoi(readTrim(fsys, p+"device/numa_node")); err == nil && v >= 0 {
			nic.NUMA = v
		}
		// "unknown" is what loopback and many virtual devices say
		// while passing traffic; count it as up unless the carrier
		// says otherwise.
		switch st := readTrim(fsys, p+"operstate"); st {
		case "up":
			nic.Up = true
		case "unknown":
			nic.Up = readTrim(fsys, p+"carrier") != "0"
		}
		nics = append(nics, nic)
	}
	slices.SortFunc(nics, func(a, b NIC) int { return strings.Compare(a.Name, b.Name) })
	return nics, nil
}

// System returns the file system Probe reads on this machine.
func System() fs.FS { return os.DirFS("/") }
