package plan

import (
	"testing"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/sched"
)

func TestLayoutChoice(t *testing.T) {
	consecutive := algo.Layout{Hosts: [][]int{{0, 1}, {2, 3}}}
	interleaved := algo.Layout{Hosts: [][]int{{0, 2}, {1, 3}}}
	tests := []struct {
		name   string
		layout *algo.Layout
		o      string
		coll   sched.Coll
		count  int
		want   string
	}{
		{"no layout", nil, "", sched.AllReduce, 16 << 20, "hd"},
		{"2x2 large", &consecutive, "", sched.AllReduce, 16 << 20, "hier"},
		{"2x2 interleaved large", &interleaved, "", sched.AllReduce, 16 << 20, "hier"},
		{"interleaved allgather", &interleaved, "", sched.AllGather, 4 << 20, "hring"},
		{"interleaved reducescatter", &interleaved, "allreduce=ring", sched.ReduceScatter, 4 << 20, "rh"}, // only a flat ring becomes hring
		{"barrier", &consecutive, "", sched.Barrier, 0, "hier"},
		{"override", &consecutive, "allreduce=hring", sched.AllReduce, 8, "hring"},
		{"override without layout", nil, "allreduce=hier", sched.AllReduce, 8, "hier"},
		{"bare name", &consecutive, "hier", sched.Broadcast, 8, "hier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := ParseOverrides(tt.o)
			if err != nil {
				t.Fatal(err)
			}
			p := New(0, 4, NetworkModel, o)
			if tt.layout != nil {
				if err := p.SetLayout(*tt.layout); err != nil {
					t.Fatal(err)
				}
			}
			s := sched.Uniform(tt.coll, 4, tt.count/4, 0, false)
			if tt.coll == sched.Barrier {
				s = sched.Spec{Coll: sched.Barrier, N: 4}
			}
			a, err := p.Choose(s, 4)
			if err != nil {
				t.Fatal(err)
			}
			if a.Name != tt.want {
				t.Errorf("chose %s, want %s", a.Name, tt.want)
			}
			if _, err := p.Program(s, 4); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := New(0, 4, NetworkModel, nil).SetLayout(algo.Layout{Hosts: [][]int{{0, 1}}}); err == nil {
		t.Error("a layout of 2 of 4 ranks accepted")
	}
	if _, err := ParseOverrides("allreduce=hyper"); err == nil {
		t.Error("unknown name accepted")
	}
}
