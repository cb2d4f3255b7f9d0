package algo

import (
	"testing"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// BenchmarkBuild measures building one rank's program at 1024 ranks.
func BenchmarkBuild(b *testing.B) {
	for _, name := range []string{"ring", "dbtree", "hd"} {
		a, _ := Lookup(sched.AllReduce, name)
		s := sched.Uniform(sched.AllReduce, 1024, 1<<20, 0, false)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Build(s, 517); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
