package topo

import (
	"reflect"
	"runtime"
	"slices"
	"testing"
	"testing/fstest"
)

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		bad  bool
	}{
		{"", nil, false},
		{"  \n", nil, false},
		{"0", []int{0}, false},
		{"0-3\n", []int{0, 1, 2, 3}, false},
		{"0-1,8,10-11", []int{0, 1, 8, 10, 11}, false},
		{"3,1,2-3", []int{1, 2, 3}, false},
		{"1-0", nil, true},
		{"a", nil, true},
		{"-1", nil, true},
		{"0-", nil, true},
		{"0,,1", nil, true},
		{"0-99999999", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseCPUList(tt.in)
		if (err != nil) != tt.bad {
			t.Errorf("ParseCPUList(%q) error %v, want error %v", tt.in, err, tt.bad)
			continue
		}
		if !tt.bad && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseCPUList(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if !tt.bad {
			if back, _ := ParseCPUList(FormatCPUList(got)); !slices.Equal(back, got) {
				t.Errorf("FormatCPUList(%v) = %q does not parse back", got, FormatCPUList(got))
			}
		}
	}
	if got := FormatCPUList([]int{5, 0, 1, 2, 7, 8, 2}); got != "0-2,5,7-8" {
		t.Errorf("FormatCPUList = %q", got)
	}
}

// machine returns a fake / with the given node cpulists and NICs (name →
// files under /sys/class/net/name).
func machine(nodes map[string]string, nics map[string]map[string]string) fstest.MapFS {
	fs := fstest.MapFS{
		"proc/sys/kernel/hostname":         {Data: []byte("box\n")},
		"proc/sys/kernel/random/boot_id":   {Data: []byte("b00t\n")},
		"sys/devices/system/cpu/online":    {Data: []byte("0-3\n")},
		"sys/devices/system/node/possible": {Data: []byte("0-1\n")},
	}
	for n, list := range nodes {
		fs["sys/devices/system/node/"+n+"/cpulist"] = &fstest.MapFile{Data: []byte(list + "\n")}
	}
	for name, files := range nics {
		for f, v := range files {
			fs["sys/class/net/"+name+"/"+f] = &fstest.MapFile{Data: []byte(v + "\n")}
		}
	}
	return fs
}

func TestProbeShapes(t *testing.T) {
	lo := map[string]string{"mtu": "65536", "operstate": "unknown", "carrier": "1"}
	tests := []struct {
		name  string
		fs    fstest.MapFS
		want  Machine
		allow []int
		numa  int
	}{
		{
			name: "one node",
			fs: machine(map[string]string{"node0": "0-3"}, map[string]map[string]string{
				"lo":   lo,
				"eth0": {"speed": "10000", "mtu": "1500", "operstate": "up", "device/numa_node": "-1"},
			}),
			want: Machine{Hostname: "box", BootID: "b00t", Nodes: []Node{{0, []int{0, 1, 2, 3}}},
				NICs: []NIC{{"eth0", 10000, 1500, -1, true}, {"lo", 0, 65536, -1, true}}},
			allow: []int{1, 2}, numa: 0,
		},
		{
			name: "two sockets, a NIC on each",
			fs: machine(map[string]string{"node0": "0-1,4-5", "node1": "2-3,6-7"}, map[string]map[string]string{
				"ib0":  {"speed": "100000", "mtu": "4092", "operstate": "up", "device/numa_node": "0"},
				"ib1":  {"speed": "100000", "mtu": "4092", "operstate": "down", "device/numa_node": "1"},
				"bond": {"speed": "-1", "mtu": "9000", "operstate": "up"},
			}),
			want: Machine{Hostname: "box", BootID: "b00t", Nodes: []Node{{0, []int{0, 1, 4, 5}}, {1, []int{2, 3, 6, 7}}},
				NICs: []NIC{{"bond", 0, 9000, -1, true}, {"ib0", 100000, 4092, 0, true}, {"ib1", 100000, 4092, 1, false}}},
			allow: []int{6, 3}, numa: 1,
		},
		{
			name:  "two sockets, spanning",
			fs:    machine(map[string]string{"node1": "2-3", "node0": "0-1"}, nil),
			want:  Machine{Hostname: "box", BootID: "b00t", Nodes: []Node{{0, []int{0, 1}}, {1, []int{2, 3}}}},
			allow: []int{1, 2}, numa: -1,
		},
		{
			name: "no node directory",
			fs: machine(nil, map[string]map[string]string{
				"eth0": {"operstate": "dormant"}, // no speed, no mtu
			}),
			want:  Machine{Hostname: "box", BootID: "b00t", Nodes: []Node{{0, []int{0, 1, 2, 3}}}, NICs: []NIC{{"eth0", 0, 0, -1, false}}},
			allow: []int{3}, numa: 0,
		},
		{
			name: "nothing at all",
			fs:   fstest.MapFS{},
			want: Machine{}, allow: []int{0}, numa: -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Probe(tt.fs)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m, tt.want) {
				t.Fatalf("Probe = %+v\nwant    %+v", m, tt.want)
			}
			c := NewCard(m, "h", tt.allow, "10.0.0.1", map[string][]string{"eth0": {"10.0.0.1"}, "eth1": {"10.1.0.1"}})
			if c.NUMA != tt.numa {
				t.Errorf("card NUMA = %d, want %d", c.NUMA, tt.numa)
			}
			if c.DataNIC != "eth0" || !slices.Equal(c.Addrs, []string{"10.0.0.1", "10.1.0.1"}) {
				t.Errorf("card data NIC %q addrs %v", c.DataNIC, c.Addrs)
			}
			roundTrip(t, c)
		})
	}
}

func TestProbeMalformed(t *testing.T) {
	for name, fs := range map[string]fstest.MapFS{
		"cpulist": machine(map[string]string{"node0": "0-x"}, nil),
		"online":  {"sys/devices/system/cpu/online": {Data: []byte("3-1")}},
	} {
		if _, err := Probe(fs); err == nil {
			t.Errorf("%s: Probe accepted a malformed file", name)
		}
	}
}

// TestProbeReal reads this machine: it must have at least one node, and
// this process's CPUs must be within the machine's.
func TestProbeReal(t *testing.T) {
	m, err := Probe(System())
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) == 0 {
		t.Fatal("no allowed CPUs")
	}
	if runtime.GOOS == "linux" {
		if len(m.Nodes) == 0 {
			t.Fatal("no NUMA node on Linux")
		}
		var all []int
		for _, n := range m.Nodes {
			all = append(all, n.CPUs...)
		}
		for _, c := range cpus {
			if !slices.Contains(all, c) {
				t.Errorf("allowed CPU %d is in no node %v", c, m.Nodes)
			}
		}
		if !slices.ContainsFunc(m.NICs, func(n NIC) bool { return n.Name == "lo" }) {
			t.Errorf("no loopback among %v", m.NICs)
		}
	}
	c, err := Discover("me", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if c.DataNIC != "lo" && runtime.GOOS == "linux" {
		t.Errorf("data NIC for 127.0.0.1 is %q, want lo", c.DataNIC)
	}
	roundTrip(t, c)
}

func roundTrip(t *testing.T, c Card) {
	t.Helper()
	b, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var d Card
	if err := d.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normal(c), normal(d)) {
		t.Fatalf("card round trip\n got %+v\nwant %+v", d, c)
	}
}

// normal maps empty slices to nil, as decoding does.
func normal(c Card) Card {
	if len(c.CPUs) == 0 {
		c.CPUs = nil
	}
	if len(c.Addrs) == 0 {
		c.Addrs = nil
	}
	if len(c.NICs) == 0 {
		c.NICs = nil
	}
	if len(c.Nodes) == 0 {
		c.Nodes = nil
	}
	for i := range c.Nodes {
		if len(c.Nodes[i].CPUs) == 0 {
			c.Nodes[i].CPUs = nil
		}
	}
	return c
}
