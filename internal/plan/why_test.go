package plan

import (
	"testing"

	"github.com/hcomm-go/hcomm/internal/sched"
)

func TestWhy(t *testing.T) {
	o := Overrides{sched.AllReduce: "ring"}
	for _, tt := range []struct {
		c     sched.Coll
		algo  string
		group bool
		want  string
	}{
		{sched.Broadcast, "tree", false, "cheapest under the cost model"},
		{sched.Broadcast, "group", true, "small, every rank on this host: slots in the shared segment"},
		{sched.AllReduce, "ring", false, "forced (HCOMM_ALGO / Config.Algo)"},
		{sched.AllReduce, "rd", false, "the forced ring cannot serve this call; cheapest under the cost model"},
	} {
		if got := o.Why(tt.c, tt.algo, tt.group); got != tt.want {
			t.Errorf("Why(%v, %s, %v) = %q, want %q", tt.c, tt.algo, tt.group, got, tt.want)
		}
	}
}
