package sim

import (
	"testing"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/sched"
)

func BenchmarkRing2048(b *testing.B) {
	a, _ := algo.Lookup(sched.AllReduce, "ring")
	for b.Loop() {
		if _, err := Simulate(Default(), a, sched.AllReduce, 2048, 1<<20, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScale is the simulator's headline case: 16,384 ranks (2,048
// hosts × 8, racks of 32) at 1 MiB.
func BenchmarkScale(b *testing.B) {
	for _, name := range []string{"ring", "rd", "hd", "dbtree"} {
		a, _ := algo.Lookup(sched.AllReduce, name)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Simulate(Default(), a, sched.AllReduce, 16384, 1<<20, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkScale1G(b *testing.B) {
	topo := Default()
	for _, a := range topo.Algorithms(sched.AllReduce, 16384) {
		b.Run(a.Name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Simulate(topo, a, sched.AllReduce, 16384, 1<<30, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
