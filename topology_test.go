package hcomm

import (
	"reflect"
	"testing"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/topo"
)

func TestSubLayout(t *testing.T) {
	parent := algo.Layout{Hosts: [][]int{{0, 2, 4}, {1, 3, 5}, {6}}}
	tests := []struct {
		parents []int
		want    [][]int
	}{
		{[]int{0, 1, 2, 3, 4, 5, 6}, [][]int{{0, 2, 4}, {1, 3, 5}, {6}}},
		{[]int{0, 2, 4}, [][]int{{0, 1, 2}}},
		{[]int{6, 1, 0}, [][]int{{2}, {1}, {0}}}, // keyed in another order
		{[]int{5, 3}, [][]int{{1, 0}}},           // the parent's order within a host
	}
	for _, tt := range tests {
		got := subLayout(parent, tt.parents)
		if !reflect.DeepEqual(got.Hosts, tt.want) {
			t.Errorf("subLayout(%v) = %v, want %v", tt.parents, got.Hosts, tt.want)
		}
		if err := got.Check(len(tt.parents)); err != nil {
			t.Error(err)
		}
	}
}

func TestInterLink(t *testing.T) {
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
		{"unknown speed", &topo.Topology{Hosts: []topo.Host{{DataNIC: "veth0", NICs: []topo.NIC{{Name: "veth0"}}}}}, plan.NetworkModel.Beta, false},
		{"1 Gbit/s NIC", nic(1000), 8 / 1e9, true},
		{"fast NICs keep the default", nic(100000), plan.NetworkModel.Beta, true},
		{"the file's speed as given", &topo.Topology{Links: topo.Links{Inter: 100}}, 8 / 100e9, true},
	}
	for _, tt := range tests {
		l, ok := interLink(tt.t)
		if ok != tt.ok || l.Beta != tt.beta || l.Alpha != plan.NetworkModel.Alpha {
			t.Errorf("%s: interLink = %+v, %v; want β %g, %v", tt.name, l, ok, tt.beta, tt.ok)
		}
	}
}
