package hcomm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestExplainPlan: a live communicator's explanation names the algorithm
// its collectives then run, prices every candidate with terms that add up,
// and says why.
func TestExplainPlan(t *testing.T) {
	var mu sync.Mutex
	ran := map[int]string{} // count → algorithm run
	obs := &Observer{OpEnd: func(e OpEvent) {
		mu.Lock()
		ran[e.Bytes/4] = e.Algo
		mu.Unlock()
	}}
	counts := []int{1, 1 << 10, 1 << 18}
	expl := make([][]PlanExplanation, 4)
	onLocalRanks(t, 4, &Config{Timeout: time.Minute, Observer: obs}, func(c *Comm) error {
		for _, n := range counts {
			e, err := c.ExplainPlan("allreduce", DTypeFloat32, n)
			if err != nil {
				return err
			}
			expl[c.Rank()] = append(expl[c.Rank()], e)
			x := make([]float32, n)
			if err := AllReduce(context.Background(), c, x, x, Sum); err != nil {
				return err
			}
		}
		return nil
	})
	for i, n := range counts {
		e := expl[0][i]
		for r := 1; r < 4; r++ {
			if expl[r][i].String() != e.String() {
				t.Errorf("count %d: rank %d explains\n%s\nrank 0\n%s", n, r, expl[r][i], e)
			}
		}
		if e.Algo == "" || e.Algo != ran[n] {
			t.Errorf("count %d: explanation picks %q, the AllReduce ran %q", n, e.Algo, ran[n])
		}
		if e.Forced || e.RunnerUp == "" || !strings.Contains(e.Reason, "cheapest under the cost model over "+e.RunnerUp) {
			t.Errorf("count %d: reason %q (runner-up %q)", n, e.Reason, e.RunnerUp)
		}
		var pick *PlanCandidate
		for j := range e.Candidates {
			k := &e.Candidates[j]
			if k.Algo == e.Algo {
				pick = k
			}
			if sum := k.Latency + k.Bandwidth + k.Reduction + k.Copy; k.Supported && (k.Time <= 0 || (sum-k.Time).Abs() > 2*time.Nanosecond+k.Time/1e6) {
				t.Errorf("count %d: %s costs %v but its terms add to %v", n, k.Algo, k.Time, sum)
			}
		}
		if pick == nil || !pick.Supported {
			t.Fatalf("count %d: the pick %s is not among the candidates %+v", n, e.Algo, e.Candidates)
		}
		for _, k := range e.Candidates {
			if k.Supported && !k.Layout && k.Time < pick.Time {
				t.Errorf("count %d: %s (%v) is cheaper than the pick %s (%v)", n, k.Algo, k.Time, e.Algo, pick.Time)
			}
		}
		if s := e.String(); !strings.Contains(s, "> "+e.Algo) || !strings.HasPrefix(s, "AllReduce of ") {
			t.Errorf("count %d: table\n%s", n, s)
		}
	}
	if expl[0][0].Algo == expl[0][2].Algo {
		t.Logf("note: the same algorithm for 4 B and 1 MiB (%s)", expl[0][0].Algo)
	}
}

func TestExplainPlanForcedAndBad(t *testing.T) {
	comms, err := NewLocal(context.Background(), 3, &Config{Timeout: time.Minute, Algo: "allreduce=ring"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	e, err := comms[0].ExplainPlan("AllReduce", DTypeFloat64, 8)
	if err != nil || e.Algo != "ring" || !e.Forced || !strings.Contains(e.Reason, "forced") {
		t.Errorf("forced ring: %+v, %v", e, err)
	}
	e, err = comms[0].ExplainPlan("barrier", DTypeUint8, 0)
	if err != nil || e.Algo == "" || e.Op != "Barrier" {
		t.Errorf("barrier: %+v, %v", e, err)
	}
	for _, bad := range []struct {
		op    string
		dt    DType
		count int
	}{{"allsum", DTypeFloat32, 1}, {"AllReduce", DTypeFloat32, -1}, {"AllReduce", DType(200), 1}, {"SendRecv", DTypeFloat32, 1}} {
		if _, err := comms[0].ExplainPlan(bad.op, bad.dt, bad.count); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ExplainPlan(%q, %v, %d): %v, want ErrInvalidArgument", bad.op, bad.dt, bad.count, err)
		}
	}
}

// TestExplainPlanGroup: a small call that takes the group path is
// explained as "shm-slots", with the planner's pick as the runner-up and
// in the reason, as the doc says; a larger one as the planner's pick.
func TestExplainPlanGroup(t *testing.T) {
	c, _ := groupComm(t, nil)
	plain, err := NewLocal(context.Background(), 2, nil) // no group path: the planner alone
	if err != nil {
		t.Fatal(err)
	}
	defer plain[1].Close()
	defer plain[0].Close()
	for _, tc := range []struct {
		count int
		group bool
	}{{1, true}, {256, true}, {1 << 20, false}} {
		e, err := c.ExplainPlan("AllReduce", DTypeFloat32, tc.count)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plain[0].ExplainPlan("AllReduce", DTypeFloat32, tc.count)
		if err != nil {
			t.Fatal(err)
		}
		if !tc.group {
			if e.Algo != p.Algo || e.Reason != p.Reason {
				t.Errorf("count %d: %q (%s), the planner alone %q (%s)", tc.count, e.Algo, e.Reason, p.Algo, p.Reason)
			}
			continue
		}
		if e.Algo != "shm-slots" || e.Forced || e.RunnerUp != p.Algo || p.Algo == "" ||
			!strings.Contains(e.Reason, "the planner's pick otherwise: "+p.Algo+" ("+p.Reason+")") ||
			!strings.Contains(e.String(), e.Reason) || len(e.Candidates) != len(p.Candidates) {
			t.Errorf("count %d: group call explained as %q, runner-up %q, reason %q, %d candidates; the planner picks %q (%s), %d candidates\n%s",
				tc.count, e.Algo, e.RunnerUp, e.Reason, len(e.Candidates), p.Algo, p.Reason, len(p.Candidates), e)
		}
	}
}
