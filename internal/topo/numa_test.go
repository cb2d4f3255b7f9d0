package topo

import (
	"testing"
)

func TestHomeNode(t *testing.T) {
	two, one := twoSockets(t), oneNode(t)
	tests := []struct {
		name string
		m    Machine
		cpus []int
		want int
	}{
		{"one node", one, []int{0}, -1},
		{"bound to node 0", two, []int{0, 1, 2, 3}, 0},
		{"bound to node 1", two, []int{5}, 1},
		{"spans nodes", two, []int{3, 4}, -1},
		{"unbound", two, []int{0, 1, 2, 3, 4, 5, 6, 7}, -1},
		{"no CPUs", two, nil, -1},
		{"CPU in no node", two, []int{42}, -1},
	}
	for _, tt := range tests {
		if got := HomeNode(tt.m, tt.cpus); got != tt.want {
			t.Errorf("%s: HomeNode = %d, want %d", tt.name, got, tt.want)
		}
	}
}
