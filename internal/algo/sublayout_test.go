package algo

import (
	"reflect"
	"testing"
)

func TestSubLayout(t *testing.T) {
	parent := Layout{Hosts: [][]int{{0, 2, 4}, {1, 3, 5}, {6}}}
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
		got := parent.Sub(tt.parents)
		if !reflect.DeepEqual(got.Hosts, tt.want) {
			t.Errorf("Sub(%v) = %v, want %v", tt.parents, got.Hosts, tt.want)
		}
		if err := got.Check(len(tt.parents)); err != nil {
			t.Error(err)
		}
	}
}
