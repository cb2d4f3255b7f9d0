package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/settings"
	"github.com/hcomm-go/hcomm/internal/sim"
)

const planUsage = `usage: hcomm plan -n N [-op OP] [-b SIZE] [-e SIZE] [-f F] [-topo FILE] [-model M] [-sim]

Explains the planner: for each size, every candidate algorithm's predicted
time under the planner's α–β–γ cost model (the one a communicator uses:
"memory" when all ranks share a host, "network" otherwise), the algorithm
the planner picks, and the terms that decided it — the pick's α (latency),
β (bytes sent), γ (bytes reduced) and δ (bytes copied) costs against the
runner-up's. With a topology of several hosts, AllReduce also lists the
host-aware algorithms (hring, hier) under their per-link-class cost. This
command picks among the flat algorithms only; a communicator that spans
hosts weighs the host-aware ones too (hcomm topo and Comm.ExplainPlan show
its live pick). -sim adds internal/sim's prediction for
the pick. Sizes are counted as hcomm perf counts them. Flags:
`

func planCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, planUsage)
		fs.PrintDefaults()
	}
	n := fs.Int("n", 8, "number of ranks")
	opName := fs.String("op", "allreduce", "collective: allreduce, allgather, reducescatter, broadcast, reduce, alltoall, gather, scatter, barrier")
	bs := fs.String("b", "8", "smallest size (bytes; K/M/G suffixes)")
	es := fs.String("e", "1G", "largest size")
	f := fs.Int("f", 4, "size multiplication factor between rows")
	topoName := fs.String("topo", "default", "topology (as hcomm sim): default, local or a JSON file; decides hosts and the model")
	modelName := fs.String("model", "auto", "cost model: auto (memory on one host, else network), memory or network")
	withSim := fs.Bool("sim", false, "also simulate the pick (hcomm sim's model)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("plan: unexpected argument %q", fs.Arg(0))
	}
	if *n < 1 {
		return fmt.Errorf("plan: -n %d: need at least 1 rank", *n)
	}
	coll, ok := sim.ParseColl(*opName)
	if !ok {
		return fmt.Errorf("plan: unknown collective %q", *opName)
	}
	lo, err := settings.ParseSize(*bs)
	if err != nil {
		return fmt.Errorf("plan: -b: %w", err)
	}
	hi, err := settings.ParseSize(*es)
	if err != nil {
		return fmt.Errorf("plan: -e: %w", err)
	}
	if hi < lo {
		hi = lo
	}
	if *f < 2 {
		return fmt.Errorf("plan: -f %d: need at least 2", *f)
	}
	topo, err := sim.Load(*topoName)
	if err != nil {
		return err
	}
	if topo.Ranks > 0 && !setFlag(fs, "n") {
		*n = topo.Ranks
	}
	hosts := topo.Hosts(*n)
	model, mname := plan.MemoryModel, "memory"
	switch {
	case *modelName == "network" || *modelName == "auto" && hosts > 1:
		model, mname = plan.NetworkModel, "network"
	case *modelName == "memory" || *modelName == "auto":
	default:
		return fmt.Errorf("plan: -model %q: want auto, memory or network", *modelName)
	}
	cands := algo.For(coll)
	var layout []algo.Algorithm
	var lc algo.LinkCosts
	var l algo.Layout
	if coll == sched.AllReduce && hosts > 1 {
		l = topo.Layout(*n)
		for _, a := range algo.ForLayout(l) {
			if a.Coll == coll {
				layout = append(layout, a)
			}
		}
		lc = algo.LinkCosts{Intra: algo.Link(topo.SHM), Inter: algo.Link{Alpha: topo.Net.Alpha, Beta: max(topo.Net.Beta, 1/topo.NICBW)}, Gamma: topo.Gamma}
	}
	fmt.Fprintf(stdout, "# hcomm plan %s on %d ranks (%d host(s)), %s model: α %.3g µs, β %.3g GB/s, γ %.3g GB/s, chunk %d\n",
		coll, *n, hosts, mname, model.Alpha*1e6, 1/model.Beta/1e9, 1/model.Gamma/1e9, model.Chunk)
	if len(layout) > 0 {
		fmt.Fprintf(stdout, "# host-aware (*): per-link costs of topology %s, not among this command's picks (a communicator spanning hosts weighs them)\n", topoOrFile(topo, *topoName))
	}
	head := fmt.Sprintf("# %12s", "size")
	for _, a := range cands {
		head += fmt.Sprintf(" %11s", a.Name)
	}
	for _, a := range layout {
		head += fmt.Sprintf(" %11s", a.Name+"*")
	}
	head += "  pick (µs per call; why: pick − runner-up per term)"
	fmt.Fprintln(stdout, head)
	for _, size := range simSizes(coll, lo, hi, *f) {
		s, es, reported, err := sim.Spec(coll, *n, size)
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		row := fmt.Sprintf("  %12d", reported)
		type cost struct {
			name       string
			total      float64
			a, b, g, d float64
		}
		var costs []cost
		for _, a := range cands {
			c := cost{name: a.Name, total: math.Inf(1)}
			if a.Supports(s) {
				total, terms := model.Terms(a, s, es)
				c = cost{a.Name, total, terms[0], terms[1], terms[2], terms[3]}
			}
			costs = append(costs, c)
			row += " " + usCol(c.total)
		}
		for _, a := range layout {
			row += " " + usCol(algo.LayoutCost(coll, a.Name, l, float64(reported), lc))
		}
		pick, err := plan.New(0, *n, model, nil).Choose(s, es)
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		var p, ru *cost
		for i := range costs {
			c := &costs[i]
			if c.name == pick.Name {
				p = c
			}
		}
		for i := range costs {
			c := &costs[i]
			if c != p && !math.IsInf(c.total, 1) && (ru == nil || c.total < ru.total) {
				ru = c
			}
		}
		row += "  " + pick.Name
		if p != nil && ru != nil {
			row += fmt.Sprintf(" over %s: %s", ru.name, plan.Why(p.a-ru.a, p.b-ru.b, p.g-ru.g, p.d-ru.d))
		}
		if *withSim {
			r, err := sim.Simulate(topo, pick, coll, *n, size, sim.Options{})
			if err != nil {
				row += "; sim: " + err.Error()
			} else {
				row += fmt.Sprintf("; sim %.4g µs", r.Time*1e6)
			}
		}
		fmt.Fprintln(stdout, row)
	}
	return nil
}

func usCol(sec float64) string {
	if math.IsInf(sec, 1) || math.IsNaN(sec) {
		return fmt.Sprintf("%11s", "-")
	}
	return fmt.Sprintf("%11.4g", sec*1e6)
}
