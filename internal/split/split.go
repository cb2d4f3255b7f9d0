// Package split decides the membership of the communicators Comm.Split
// makes, as MPI_Comm_split does.
package split

import (
	"cmp"
	"slices"
)

// Members returns the ranks of the communicator this rank (rank) joins
// with color, given every rank's color and key (pairs[2r], pairs[2r+1]):
// members[i] is the parent's rank of the new communicator's rank i,
// ordered by key, ties broken by the parent's rank; newRank is this rank's
// place among them. A negative color joins nothing (members nil, newRank
// -1).
func Members(pairs []int64, color, rank int) (members []int, newRank int) {
	if color < 0 {
		return nil, -1
	}
	for r := range len(pairs) / 2 {
		if pairs[2*r] == int64(color) {
			members = append(members, r)
		}
	}
	slices.SortStableFunc(members, func(a, b int) int { return cmp.Compare(pairs[2*a+1], pairs[2*b+1]) })
	return members, slices.Index(members, rank)
}
