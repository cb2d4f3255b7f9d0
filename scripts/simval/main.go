// Command simval compares hcomm sim's predictions with measurements made
// by measure.sh: for every (collective, algorithm, ranks, size) the median
// of the runs beside the simulator's prediction on the "local" topology,
// as the markdown rows of BENCHMARKS.md's validation table. "fit" searches
// α, β, γ and the cache factor for the smallest mean error first.
//
//	scripts/simval/measure.sh /tmp/simval && go run ./scripts/simval /tmp/simval [fit]
package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/sim"
)

type key struct {
	op, algo string
	n        int
	bytes    int64
}

func main() {
	dir := os.Args[1]
	meas := map[key][]float64{}
	algos := []string{"ring", "rd", "hd", "dbtree"}
	for _, n := range []int{2, 4, 8} {
		for rep := 1; rep <= 3; rep++ {
			for _, pre := range []string{"ar", "ag"} {
				f, err := os.Open(fmt.Sprintf("%s/%s_n%d_r%d.csv", dir, pre, n, rep))
				if err != nil {
					continue
				}
				rows, _ := csv.NewReader(f).ReadAll()
				f.Close()
				idx := -1
				prevOp := ""
				var last int64 = 1 << 62
				for _, r := range rows[1:] {
					if r[0] == "impl" {
						continue
					}
					b, _ := strconv.ParseInt(r[3], 10, 64)
					us, _ := strconv.ParseFloat(r[4], 64)
					if r[1] != prevOp || b <= last {
						if r[1] != prevOp {
							idx = 0
						} else {
							idx++
						}
					}
					prevOp, last = r[1], b
					a := "ring"
					switch r[1] {
					case "allreduce":
						a = algos[idx]
					case "allgather":
						a = "auto"
					case "broadcast":
						a = "auto"
					}
					k := key{r[1], a, n, b}
					meas[k] = append(meas[k], us)
				}
			}
		}
	}
	t := sim.Local()
	if len(os.Args) > 2 && os.Args[2] == "fit" {
		best, bestv := t, 1e9
		for _, al := range []float64{10e-6, 12e-6, 14e-6, 16e-6, 18e-6, 20e-6} {
			for _, be := range []float64{0.35e-9, 0.4e-9, 0.45e-9, 0.5e-9} {
				for _, ga := range []float64{0.1e-9, 0.2e-9, 0.3e-9, 0.5e-9} {
					for _, co := range []float64{0.1, 0.15, 0.2, 0.25, 0.3} {
						tt := t
						tt.SHM.Alpha, tt.SHM.Beta, tt.Gamma, tt.CacheFactor = al, be, ga, co
						tt.CacheBytes = 32 << 20
						v := eval(tt, meas, false)
						if v < bestv {
							best, bestv = tt, v
						}
					}
				}
			}
		}
		fmt.Printf("best alpha %g beta %g gamma %g cache factor %g: %.1f%%\n", best.SHM.Alpha, best.SHM.Beta, best.Gamma, best.CacheFactor, bestv)
		t = best
	} else if len(os.Args) > 2 {
		p := strings.Split(os.Args[2], ",")
		t.SHM.Alpha, _ = strconv.ParseFloat(p[0], 64)
		t.SHM.Beta, _ = strconv.ParseFloat(p[1], 64)
		t.Gamma, _ = strconv.ParseFloat(p[2], 64)
		t.Cores, _ = strconv.Atoi(p[3])
	}
	eval(t, meas, true)
}

var md = map[[3]string]map[int64]string{}
var mdKeys [][3]string

func fnum(us float64) string {
	if us >= 1000 {
		return fmt.Sprintf("%.1f ms", us/1000)
	}
	return fmt.Sprintf("%.0f µs", us)
}

func eval(t sim.Topology, meas map[key][]float64, verbose bool) float64 {
	var keys []key
	for k := range meas {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.op != b.op {
			return a.op < b.op
		}
		if a.n != b.n {
			return a.n < b.n
		}
		if a.algo != b.algo {
			return a.algo < b.algo
		}
		return a.bytes < b.bytes
	})
	colls := map[string]sched.Coll{"allreduce": sched.AllReduce, "allgather": sched.AllGather, "broadcast": sched.Broadcast}
	within, total := 0, 0
	var sumAbs float64
	for _, k := range keys {
		v := meas[k]
		sort.Float64s(v)
		med := v[len(v)/2]
		name := k.algo
		if k.op == "broadcast" {
			continue
		}
		if name == "auto" {
			sp, es, _, _ := sim.Spec(colls[k.op], k.n, k.bytes)
			ch, _ := plan.New(0, k.n, plan.MemoryModel, nil).Choose(sp, es)
			name = ch.Name
		}
		a, ok := algo.Lookup(colls[k.op], name)
		if !ok {
			continue
		}
		r, err := sim.Simulate(t, a, colls[k.op], k.n, k.bytes, sim.Options{})
		if err != nil {
			fmt.Println(err)
			continue
		}
		pred := r.Time * 1e6
		e := (pred - med) / med * 100
		total++
		if e < 25 && e > -25 {
			within++
		}
		sumAbs += max(e, -e)
		if !verbose {
			continue
		}
		mk := [3]string{k.op, name, strconv.Itoa(k.n)}
		if md[mk] == nil {
			md[mk] = map[int64]string{}
		}
		md[mk][k.bytes] = fmt.Sprintf("%s / %s (%+.0f%%)", fnum(med), fnum(pred), e)
		if !slices.Contains(mdKeys, [3]string{k.op, name, strconv.Itoa(k.n)}) {
			mdKeys = append(mdKeys, [3]string{k.op, name, strconv.Itoa(k.n)})
		}
		fmt.Printf("%-9s %-8s n=%d %9d  meas %9.1f (%v)  pred %9.1f  err %+6.1f%%\n", k.op, name, k.n, k.bytes, med, v, pred, e)
	}
	if verbose {
		for _, k := range mdKeys {
			var cols []string
			for _, b := range []int64{8, 128, 2048, 32768, 524288, 8388608, 16777216} {
				c, ok := md[k][b]
				if !ok {
					c = "–"
				}
				cols = append(cols, c)
			}
			fmt.Printf("| %s | %s | %s | %s |\n", k[0], k[1], k[2], strings.Join(cols, " | "))
		}
		fmt.Printf("within 25%%: %d/%d, mean |err| %.1f%%\n", within, total, sumAbs/float64(total))
	}
	return sumAbs / float64(total)
}
