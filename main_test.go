package hcomm

import (
	"slices"
	"testing"

	"github.com/hcomm-go/hcomm/internal/algo"
	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// algoNames lists every algorithm name once.
func algoNames() []string {
	var names []string
	for _, a := range algo.All() {
		if !slices.Contains(names, a.Name) {
			names = append(names, a.Name)
		}
	}
	slices.Sort(names)
	return names
}
