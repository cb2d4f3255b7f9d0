package topo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
)

// Card encoding: a version byte, then fields in order; strings and lists
// are length-prefixed (uvarint), integers are varints, CPU sets are kernel
// CPU lists. A card of a machine with hundreds of CPUs and dozens of NICs
// stays within a few hundred bytes.
const (
	cardVersion = 2 // 2: the process id
	// MaxCardBytes bounds an encoded card.
	MaxCardBytes = 64 << 10
	maxString    = 4 << 10
	maxList      = 1 << 10
)

// MarshalBinary encodes the card compactly.
func (c *Card) MarshalBinary() ([]byte, error) {
	b := []byte{cardVersion}
	var err error
	str := func(s string) {
		if len(s) > maxString && err == nil {
			err = fmt.Errorf("topo: card string of %d bytes", len(s))
		}
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	num := func(v int) { b = binary.AppendVarint(b, int64(v)) }
	count := func(n int) {
		if n > maxList && err == nil {
			err = fmt.Errorf("topo: card list of %d entries", n)
		}
		b = binary.AppendUvarint(b, uint64(n))
	}
	str(c.Host)
	str(c.Hostname)
	str(c.Machine)
	str(c.DataNIC)
	str(c.File)
	count(len(c.Addrs))
	for _, a := range c.Addrs {
		str(a)
	}
	num(c.NUMA)
	str(FormatCPUList(c.CPUs))
	count(len(c.Nodes))
	for _, n := range c.Nodes {
		num(n.ID)
		str(FormatCPUList(n.CPUs))
	}
	count(len(c.NICs))
	for _, n := range c.NICs {
		str(n.Name)
		num(n.SpeedMbps)
		num(n.MTU)
		num(n.NUMA)
		up := byte(0)
		if n.Up {
			up = 1
		}
		b = append(b, up)
	}
	num(c.PID)
	if err == nil && len(b) > MaxCardBytes {
		err = fmt.Errorf("topo: card of %d bytes", len(b))
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

var errShort = errors.New("topo: truncated card")

// UnmarshalBinary decodes a card encoded by MarshalBinary. Any input that
// is not such a card is an error.
func (c *Card) UnmarshalBinary(b []byte) error {
	if len(b) > MaxCardBytes {
		return fmt.Errorf("topo: card of %d bytes", len(b))
	}
	if len(b) == 0 || b[0] != cardVersion {
		return errors.New("topo: not a topology card (or one of another version)")
	}
	d := decoder{b: b[1:]}
	var out Card
	out.Host = d.str()
	out.Hostname = d.str()
	out.Machine = d.str()
	out.DataNIC = d.str()
	out.File = d.str()
	for range d.count() {
		out.Addrs = append(out.Addrs, d.str())
	}
	out.NUMA = d.num()
	out.CPUs = d.cpus()
	for range d.count() {
		out.Nodes = append(out.Nodes, Node{ID: d.num(), CPUs: d.cpus()})
	}
	for range d.count() {
		n := NIC{Name: d.str(), SpeedMbps: d.num(), MTU: d.num(), NUMA: d.num()}
		switch d.byte() {
		case 0:
		case 1:
			n.Up = true
		default:
			d.fail(errors.New("topo: bad NIC state in card"))
		}
		out.NICs = append(out.NICs, n)
	}
	out.PID = d.num()
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("topo: %d bytes after the card", len(d.b))
	}
	if d.err != nil {
		return d.err
	}
	*c = out
	return nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) num() int {
	v, n := binary.Varint(d.b)
	if n <= 0 || v < -1<<31 || v > 1<<31-1 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

func (d *decoder) count() int {
	v := d.uvarint()
	if v > maxList {
		d.fail(fmt.Errorf("topo: card list of %d entries", v))
		return 0
	}
	return int(v)
}

func (d *decoder) str() string {
	v := d.uvarint()
	if v > maxString || v > uint64(len(d.b)) {
		d.fail(errShort)
		return ""
	}
	s := string(d.b[:v])
	d.b = d.b[v:]
	return s
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail(errShort)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) cpus() []int {
	s := d.str()
	if d.err != nil {
		return nil
	}
	c, err := ParseCPUList(s)
	if err != nil {
		d.fail(fmt.Errorf("topo: card: %w", err))
	}
	return c
}

// NewCard builds a rank's card from what was read about its machine.
// allowed are the CPUs the rank may run on; dataIP is the address of its
// data socket ("" when unknown), whose interface ifaddrs maps to a name.
func NewCard(m Machine, host string, allowed []int, dataIP string, ifaddrs map[string][]string) Card {
	c := Card{Host: host, Hostname: m.Hostname, Machine: m.BootID, Nodes: m.Nodes, NICs: m.NICs,
		CPUs: slices.Clone(allowed)}
	slices.Sort(c.CPUs)
	c.NUMA = NodeOf(m.Nodes, c.CPUs)
	if dataIP != "" {
		c.Addrs = append(c.Addrs, dataIP)
	}
	names := make([]string, 0, len(ifaddrs))
	for name := range ifaddrs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, a := range ifaddrs[name] {
			if a == dataIP {
				c.DataNIC = name
			} else if len(c.Addrs) < maxList {
				c.Addrs = append(c.Addrs, a)
			}
		}
	}
	return c
}

// Discover reads this process's card from the running system: the
// machine's sysfs, its CPU affinity and its interfaces' addresses.
func Discover(host, dataIP string) (Card, error) {
	m, err := Probe(System())
	if err != nil {
		return Card{}, err
	}
	cpus, err := AllowedCPUs()
	if err != nil {
		return Card{}, fmt.Errorf("topo: CPU affinity: %w", err)
	}
	c := NewCard(m, host, cpus, dataIP, InterfaceAddrs())
	c.PID = os.Getpid()
	return c, nil
}

// InterfaceAddrs maps this machine's interfaces to their addresses.
func InterfaceAddrs() map[string][]string {
	out := map[string][]string{}
	ifs, err := net.Interfaces()
	if err != nil {
		return out
	}
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLinkLocalUnicast() {
				out[ifc.Name] = append(out[ifc.Name], ipn.IP.String())
			}
		}
	}
	return out
}
