package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/settings"
	"github.com/hcomm-go/hcomm/internal/sim"
	"github.com/hcomm-go/hcomm/internal/traceevent"
)

const simUsage = `usage: hcomm sim -n N [-op OP] [-b SIZE] [-e SIZE] [-f F] [-topo FILE] [-algo NAMES] [-unfused]

Predicts a collective's time on a modelled cluster by running the programs
the executor runs through a discrete-event model (per-link α/β, cores,
memory, NIC and rack uplink bandwidth shared by the flows crossing them,
the executor's chunking and pipelining). For each size and algorithm it
prints the predicted time, algbw and busbw (GB/s, nccl-tests factors; sizes
counted as hcomm perf counts them) and the critical path: its chunks per
link class and what its time was spent on (α latency, transfer, queueing
for busy resources, reduction, local copies).

Small collectives of ranks all on one host (a contribution of at most 1 KiB)
run as one group call through shared-memory slots, not a schedule: a
"shm-slots" row then shows that call's prediction.

Over shared memory the executor fuses large messages (a two-step pair
exchange of at least 4 MiB in one transport call, an AllGather's own-block
copy of at least 4 MiB riding its send); the model does the same unless
-unfused is given, which predicts the executor without those fusions.

-topo is "default" (8 ranks per host, racks of 32 hosts, 100 Gb/s NICs,
2:1 uplinks), "local" (this kind of 2-core machine over shared memory, as
calibrated in BENCHMARKS.md) or a JSON file of internal/sim's Topology
(fields left out keep default's values). Flags:
`

func simCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, simUsage)
		fs.PrintDefaults()
	}
	n := fs.Int("n", 8, "number of ranks")
	opName := fs.String("op", "allreduce", "collective: allreduce, allgather, reducescatter, broadcast, reduce, alltoall, gather, scatter, barrier")
	bs := fs.String("b", "8", "smallest size (bytes; K/M/G suffixes)")
	es := fs.String("e", "", "largest size (default: -b)")
	f := fs.Int("f", 4, "size multiplication factor between rows")
	topoName := fs.String("topo", "default", "topology: default, local or a JSON file")
	algoNames := fs.String("algo", "", "algorithms to simulate, comma-separated (default: all of the collective)")
	unfused := fs.Bool("unfused", false, "simulate the executor without its large-message fusions over shared memory (fused pair exchange, copy riding its send)")
	traceFile := fs.String("trace", "", "write the simulated timeline (one algorithm, one size, up to 4096 ranks) as a trace-event file: a track per rank, a slice per step")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sim: unexpected argument %q", fs.Arg(0))
	}
	if *n < 1 {
		return fmt.Errorf("sim: -n %d: need at least 1 rank", *n)
	}
	coll, ok := sim.ParseColl(*opName)
	if !ok {
		return fmt.Errorf("sim: unknown collective %q", *opName)
	}
	lo, err := settings.ParseSize(*bs)
	if err != nil {
		return fmt.Errorf("sim: -b: %w", err)
	}
	hi := lo
	if *es != "" {
		if hi, err = settings.ParseSize(*es); err != nil {
			return fmt.Errorf("sim: -e: %w", err)
		}
	}
	if hi < lo {
		return fmt.Errorf("sim: -e %d below -b %d", hi, lo)
	}
	if *f < 2 {
		return fmt.Errorf("sim: -f %d: need at least 2", *f)
	}
	topo, err := sim.Load(*topoName)
	if err != nil {
		return err
	}
	if topo.Ranks > 0 && !setFlag(fs, "n") {
		*n = topo.Ranks // the topology file's ranks
	}
	algos, err := pickAlgos(topo, coll, *n, *algoNames)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	sizes := simSizes(coll, lo, hi, *f)
	if *traceFile != "" {
		if len(algos) != 1 || len(sizes) != 1 || *n > 4096 {
			return fmt.Errorf("sim: -trace needs one algorithm (-algo), one size (no -e) and at most 4096 ranks")
		}
		return simTrace(topo, algos[0], coll, *n, sizes[0], *traceFile, *unfused, stdout)
	}
	fmt.Fprintf(stdout, "# hcomm sim %s, topology %s\n# %s\n", coll, topoOrFile(topo, *topoName), topo.String(*n))
	if *unfused {
		fmt.Fprintf(stdout, "# -unfused: the executor without its large-message fusions over shared memory\n")
	}
	fmt.Fprintf(stdout, "# %12s %-14s %12s %8s %8s  %s\n", "size", "algo", "time(us)", "algbw", "busbw", "critical path")
	t0 := time.Now()
	var peak int64
	reduced := map[string]string{}
	for _, size := range sizes {
		best, bestT := "", 0.0
		// The algorithms are simulated side by side, one per CPU.
		type out struct {
			r   sim.Result
			err error
		}
		outs := make([]chan out, len(algos))
		sem := make(chan struct{}, runtime.GOMAXPROCS(0))
		for i, a := range algos {
			outs[i] = make(chan out, 1)
			go func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				r, err := sim.Simulate(topo, a, coll, *n, size, sim.Options{Unfused: *unfused})
				outs[i] <- out{r, err}
			}()
		}
		for i, a := range algos {
			o := <-outs[i]
			r, err := o.r, o.err
			if err != nil {
				fmt.Fprintf(stdout, "  %12d %-14s %s\n", size, a.Name, err)
				continue
			}
			peak = max(peak, r.ModelBytes)
			if r.Simulated < r.N {
				how := "shifted"
				if r.XOR {
					how = "XORed"
				}
				reduced[a.Name] = fmt.Sprintf("%s: %d of %d ranks simulated (programs repeat every %d ranks, peers %s)", a.Name, r.Simulated, r.N, r.Period, how)
			}
			if r.Folded > 0 {
				if reduced[a.Name] == "" {
					reduced[a.Name] = a.Name + ": all ranks simulated"
				}
				reduced[a.Name] += fmt.Sprintf("; %d steps in a steady state jumped over", r.Folded)
			}
			fmt.Fprintf(stdout, "  %12d %-14s %12.2f %8.3f %8.3f  %s\n", r.Bytes, r.Algo, r.Time*1e6, r.AlgBW, r.BusBW, critical(&r.Critical))
			if best == "" || r.Time < bestT {
				best, bestT = a.Name, r.Time
			}
		}
		slots := *algoNames == "" && sim.SlotFits(topo, coll, *n, size)
		if slots {
			// The library runs this call as a group call, whatever
			// the schedules would take.
			r, err := sim.Slots(topo, coll, *n, size, sim.Options{Unfused: *unfused})
			if err != nil {
				return fmt.Errorf("sim: %w", err)
			}
			fmt.Fprintf(stdout, "  %12d %-14s %12.2f %8.3f %8.3f  %s\n", r.Bytes, r.Algo, r.Time*1e6, r.AlgBW, r.BusBW, critical(&r.Critical))
			fmt.Fprintf(stdout, "  %12s runs as: %s (a group call through shared-memory slots, not a schedule)\n", "", r.Algo)
		}
		if len(algos) > 1 && best != "" {
			if slots {
				fmt.Fprintf(stdout, "  %12s fastest schedule: %s (not run: the group call is)\n", "", best)
			} else {
				fmt.Fprintf(stdout, "  %12s fastest: %s\n", "", best)
			}
		}
	}
	for _, a := range algos {
		if s, ok := reduced[a.Name]; ok {
			fmt.Fprintf(stdout, "# %s\n", s)
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(stdout, "# simulated in %.2f s; model state up to %.1f MiB, Go heap %.0f MiB\n",
		time.Since(t0).Seconds(), float64(peak)/(1<<20), float64(ms.HeapSys)/(1<<20))
	return nil
}

func topoOrFile(t sim.Topology, name string) string {
	if t.Name != "" {
		return t.Name
	}
	return name
}

// pickAlgos returns the algorithms of coll on n ranks of topo named in
// names (all if empty), the host-aware ones included.
func pickAlgos(topo sim.Topology, coll sched.Coll, n int, names string) ([]algo.Algorithm, error) {
	all := topo.Algorithms(coll, n)
	if strings.TrimSpace(names) == "" {
		return all, nil
	}
	var out []algo.Algorithm
	for _, nm := range strings.Split(names, ",") {
		nm = sim.ResolveAlgo(coll, strings.TrimSpace(strings.ToLower(nm)))
		i := slices.IndexFunc(all, func(a algo.Algorithm) bool { return a.Name == nm })
		if i < 0 {
			var have []string
			for _, a := range all {
				have = append(have, a.Name)
			}
			return nil, fmt.Errorf("no %s algorithm %q (have %s)", coll, nm, strings.Join(have, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// simSizes returns lo, lo·f, … below hi, then hi (one size for Barrier).
func simSizes(coll sched.Coll, lo, hi int64, f int) []int64 {
	if coll == sched.Barrier {
		return []int64{0}
	}
	var s []int64
	for v := lo; v < hi; v *= int64(f) {
		s = append(s, v)
		if v > hi/int64(f) {
			break
		}
		v = max(v, 1)
	}
	return append(s, hi)
}

// critical summarises a critical path in one line.
func critical(b *sim.Breakdown) string {
	var msgs []string
	var total int64
	for c, k := range b.Msgs {
		if k > 0 {
			msgs = append(msgs, fmt.Sprintf("%s %d", sim.ClassNames[c], k))
		}
		total += k
	}
	sum := b.Total()
	pct := func(v float64) float64 {
		if sum <= 0 {
			return 0
		}
		return 100 * v / sum
	}
	s := fmt.Sprintf("%d chunks", total)
	if len(msgs) > 0 {
		s += " (" + strings.Join(msgs, ", ") + ")"
	}
	return s + fmt.Sprintf("; α %.0f%% transfer %.0f%% queue %.0f%% reduce %.0f%% local %.0f%%; ends on rank %d",
		pct(b.Alpha), pct(b.Transfer), pct(b.Queue), pct(b.Reduce), pct(b.Local), b.Ranks[0])
}

// setFlag reports whether flag name was given on the command line.
func setFlag(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// simTrace simulates one algorithm at one size with every rank's steps
// written to file as trace-event slices (simulated time, µs from 0);
// unfused as -unfused.
func simTrace(topo sim.Topology, a algo.Algorithm, coll sched.Coll, n int, size int64, file string, unfused bool, stdout io.Writer) error {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	w := traceevent.NewWriter(f)
	for r := range n {
		w.Process(r, fmt.Sprintf("rank %d", r))
		w.Thread(r, 0, a.Name+" steps")
	}
	var b strings.Builder
	r, err := sim.Simulate(topo, a, coll, n, size, sim.Options{Unfused: unfused, Trace: func(s sim.TraceStep) {
		b.Reset()
		var bytes int64
		for i, o := range s.Ops {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(o.Kind.String())
			switch {
			case o.To >= 0:
				fmt.Fprintf(&b, " %d→%d", o.Peer, o.To)
			case o.Kind == sched.Send:
				fmt.Fprintf(&b, " →%d", o.Peer)
			case o.Peer >= 0:
				fmt.Fprintf(&b, " ←%d", o.Peer)
			}
			bytes += o.Bytes
		}
		d := (s.End - s.Start) * 1e6
		w.Write(traceevent.Event{Name: b.String(), Cat: "step", Ph: "X", TS: s.Start * 1e6, Dur: &d, PID: s.Rank, TID: 0,
			Args: map[string]any{"step": s.Step, "bytes": bytes, "ops": len(s.Ops)}})
	}})
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s on %d ranks, %d bytes: %.2f µs; timeline in %s (open it in ui.perfetto.dev)\n", coll, a.Name, n, r.Bytes, r.Time*1e6, file)
	return nil
}
