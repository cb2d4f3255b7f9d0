package topo

import (
	"reflect"
	"testing"
)

// TestSpreadShared checks the CPUs SpreadShared deals the ranks of hosts
// sharing a kernel, and that the leaders HostRanks then picks run on
// different CPUs.
func TestSpreadShared(t *testing.T) {
	const none = -1
	for _, tt := range []struct {
		name     string
		hostOf   []int    // per rank
		machines []string // per host
		cpus     []int    // every rank's mask (all the same unless bound)
		bound    []int    // per rank: its one CPU instead (none: the mask)
		pids     []int    // per rank (nil: 100+r)
		want     [][]int  // per rank, nil for left alone
		leaders  []int    // HostRanks' first ranks
	}{
		{name: "2 x 2 consecutive on 2 CPUs", hostOf: []int{0, 0, 1, 1}, machines: []string{"m", "m"}, cpus: []int{0, 1},
			want: [][]int{{0}, {1}, {0}, {1}}, leaders: []int{0, 3}},
		{name: "2 x 2 interleaved on 2 CPUs", hostOf: []int{0, 1, 0, 1}, machines: []string{"m", "m"}, cpus: []int{0, 1},
			want: [][]int{{0}, {0}, {1}, {1}}, leaders: []int{0, 3}},
		{name: "2 x 2 on 8 CPUs: a share each", hostOf: []int{0, 0, 1, 1}, machines: []string{"m", "m"}, cpus: []int{0, 1, 2, 3, 4, 5, 6, 7},
			want: [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}}, leaders: []int{0, 2}},
		{name: "4 x 1 on 2 CPUs", hostOf: []int{0, 1, 2, 3}, machines: []string{"m", "m", "m", "m"}, cpus: []int{0, 1},
			want: [][]int{{0}, {1}, {0}, {1}}, leaders: []int{0, 1, 2, 3}},
		{name: "2 x 3 on 3 CPUs", hostOf: []int{0, 0, 0, 1, 1, 1}, machines: []string{"m", "m"}, cpus: []int{0, 1, 2},
			want: [][]int{{0}, {1}, {2}, {0}, {1}, {2}}, leaders: []int{0, 4}},
		{name: "2 x 4 on 2 CPUs: more than 2 a CPU, left alone", hostOf: []int{0, 0, 0, 0, 1, 1, 1, 1}, machines: []string{"m", "m"}, cpus: []int{0, 1},
			leaders: []int{0, 4}},
		{name: "own machines: left alone", hostOf: []int{0, 0, 1, 1}, machines: []string{"m1", "m2"}, cpus: []int{0, 1},
			leaders: []int{0, 2}},
		{name: "one host: left alone", hostOf: []int{0, 0, 0, 0}, machines: []string{"m"}, cpus: []int{0, 1},
			leaders: []int{0}},
		{name: "a rank bound: left alone", hostOf: []int{0, 0, 1, 1}, machines: []string{"m", "m"}, cpus: []int{0, 1},
			bound: []int{none, none, 0, none}, leaders: []int{0, 2}},
		{name: "one CPU: left alone", hostOf: []int{0, 0, 1, 1}, machines: []string{"m", "m"}, cpus: []int{3},
			leaders: []int{0, 2}},
		{name: "ranks of one process: left alone", hostOf: []int{0, 0, 1, 1}, machines: []string{"m", "m"}, cpus: []int{0, 1},
			pids: []int{7, 7, 7, 7}, leaders: []int{0, 2}},
		{name: "process ids unknown: left alone", hostOf: []int{0, 0, 1, 1}, machines: []string{"m", "m"}, cpus: []int{0, 1},
			pids: []int{0, 0, 0, 0}, leaders: []int{0, 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cards := cardsOn(tt.hostOf)
			for r := range cards {
				cards[r].Machine = tt.machines[tt.hostOf[r]]
				cards[r].CPUs, cards[r].NUMA = tt.cpus, 0
				cards[r].Nodes = []Node{{0, tt.cpus}}
				if tt.bound != nil && tt.bound[r] != none {
					cards[r].CPUs = []int{tt.bound[r]}
				}
				cards[r].PID = 100 + r
				if tt.pids != nil {
					cards[r].PID = tt.pids[r]
				}
			}
			for self := range cards {
				topo, err := Build(cards, nil)
				if err != nil {
					t.Fatal(err)
				}
				got := topo.SpreadShared(self)
				var want []int
				if tt.want != nil {
					want = tt.want[self]
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("rank %d dealt CPUs %v, want %v", self, got, want)
				}
				for r := range cards {
					mask := cards[r].CPUs
					if tt.want != nil {
						mask = tt.want[r]
					}
					if !reflect.DeepEqual(topo.Ranks[r].CPUs, mask) {
						t.Errorf("rank %d's view: rank %d on CPUs %v, want %v", self, r, topo.Ranks[r].CPUs, mask)
					}
				}
				var leaders []int
				for _, rs := range topo.HostRanks() {
					leaders = append(leaders, rs[0])
				}
				if !reflect.DeepEqual(leaders, tt.leaders) {
					t.Errorf("leaders %v, want %v", leaders, tt.leaders)
				}
			}
		})
	}
}
