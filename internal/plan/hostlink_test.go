package plan

import (
	"reflect"
	"testing"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/topo"
)

func TestHostLink(t *testing.T) {
	nic := func(mbps int) *topo.Topology {
		return &topo.Topology{Hosts: []topo.Host{
			{DataNIC: "eth0", NICs: []topo.NIC{{Name: "eth0", SpeedMbps: mbps}}},
			{DataNIC: "eth0", NICs: []topo.NIC{{Name: "eth0", SpeedMbps: 100000}}},
		}}
	}
	tests := []struct {
		name string
		t    *topo.Topology
		beta float64
		ok   bool
	}{
		{"unknown speed", &topo.Topology{Hosts: []topo.Host{{DataNIC: "veth0", NICs: []topo.NIC{{Name: "veth0"}}}}}, NetworkModel.Beta, false},
		{"1 Gbit/s NIC", nic(1000), 8 / 1e9, true},
		{"fast NICs keep the default", nic(100000), NetworkModel.Beta, true},
		{"the file's speed as given", &topo.Topology{Links: topo.Links{Inter: 100}}, 8 / 100e9, true},
	}
	for _, tt := range tests {
		l, ok := HostLink(tt.t.Links.Inter, tt.t.InterGbps())
		if ok != tt.ok || l.Beta != tt.beta || l.Alpha != NetworkModel.Alpha {
			t.Errorf("%s: HostLink = %+v, %v; want β %g, %v", tt.name, l, ok, tt.beta, tt.ok)
		}
	}
}

// A split communicator's planner inherits the layout of its ranks and,
// when they span hosts, the link between hosts.
func TestInherit(t *testing.T) {
	p := New(0, 6, NetworkModel, nil)
	if err := p.SetLayout(algo.Layout{Hosts: [][]int{{0, 2, 4}, {1, 3, 5}}}); err != nil {
		t.Fatal(err)
	}
	link := algo.Link{Alpha: 1e-5, Beta: 1e-9}
	p.SetInterLink(link)
	for _, tt := range []struct {
		parents []int
		oneHost bool
		hosts   [][]int
	}{
		{[]int{4, 0}, true, [][]int{{1, 0}}},
		{[]int{0, 1, 3}, false, [][]int{{0}, {1, 2}}},
	} {
		if got := p.OneHost(tt.parents); got != tt.oneHost {
			t.Errorf("OneHost(%v) = %v", tt.parents, got)
		}
		q := New(0, len(tt.parents), NetworkModel, nil)
		if err := q.Inherit(p, tt.parents); err != nil {
			t.Fatal(err)
		}
		l, ok := q.Layout()
		in, hasIn := q.InterLink()
		if !ok || !reflect.DeepEqual(l.Hosts, tt.hosts) || hasIn == tt.oneHost || (hasIn && in != link) {
			t.Errorf("Inherit(%v): layout %v %v, link %+v %v", tt.parents, l.Hosts, ok, in, hasIn)
		}
	}
	q := New(0, 2, NetworkModel, nil)
	if err := q.Inherit(New(0, 4, NetworkModel, nil), []int{0, 1}); err != nil || q.OneHost([]int{0, 1}) {
		t.Errorf("no layout to inherit: %v", err)
	}
	if _, ok := q.Layout(); ok {
		t.Error("a planner without a layout gave one")
	}
}
