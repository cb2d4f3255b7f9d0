package sched

import "testing"

// CollNamed reads back every collective's String in any case, and
// refuses SendRecv and other names.
func TestCollNamed(t *testing.T) {
	for c := AllReduce; c <= Barrier; c++ {
		if got, ok := CollNamed(c.String()); !ok || got != c {
			t.Errorf("CollNamed(%q) = %v, %v", c.String(), got, ok)
		}
		if got, ok := CollNamed("x" + c.String()); ok {
			t.Errorf("CollNamed(%q) = %v, want none", "x"+c.String(), got)
		}
	}
	for _, tc := range []struct {
		name string
		want Coll
		ok   bool
	}{
		{"allreduce", AllReduce, true}, {"BROADCAST", Broadcast, true}, {"bcast", Broadcast, true}, {"reduceScatter", ReduceScatter, true},
		{"SendRecv", 0, false}, {"", 0, false}, {"coll(0)", 0, false}, {"All Reduce", 0, false},
	} {
		if got, ok := CollNamed(tc.name); got != tc.want || ok != tc.ok {
			t.Errorf("CollNamed(%q) = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
