package split

import (
	"reflect"
	"testing"
)

func TestMembers(t *testing.T) {
	tests := []struct {
		name        string
		pairs       []int64 // color, key per rank
		color, rank int
		members     []int
		newRank     int
	}{
		{"one color, keys in rank order", []int64{0, 0, 0, 0, 0, 0}, 0, 2, []int{0, 1, 2}, 2},
		{"two colors", []int64{0, 0, 1, 0, 0, 0, 1, 0}, 1, 3, []int{1, 3}, 1},
		{"keys reverse the order", []int64{5, 2, 5, 1, 5, 0}, 5, 0, []int{2, 1, 0}, 2},
		{"equal keys keep rank order", []int64{0, 7, 0, 3, 0, 7, 0, 3}, 0, 2, []int{1, 3, 0, 2}, 3},
		{"negative keys", []int64{0, -1, 0, -9}, 0, 0, []int{1, 0}, 1},
		{"negative color joins nothing", []int64{-1, 0, 0, 0}, -1, 0, nil, -1},
	}
	for _, tt := range tests {
		m, r := Members(tt.pairs, tt.color, tt.rank)
		if !reflect.DeepEqual(m, tt.members) || r != tt.newRank {
			t.Errorf("%s: Members = %v, %d; want %v, %d", tt.name, m, r, tt.members, tt.newRank)
		}
	}
}
