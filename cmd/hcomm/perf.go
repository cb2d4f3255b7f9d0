package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/hcomm-go/hcomm"
)

// perf: `hcomm perf` measures collectives the way nccl-tests does.
//
//	hcomm perf -n 2 -op allreduce -b 8 -e 256M
//	hcomm perf -n 4 -op all -inplace both -plot busbw.svg
//	hcomm perf -n 2 -csv -label hcomm-shm -T 0.2      # rows for ../shared/bench
//	hcomm perf -plot cmp.svg -replot run1.csv,run2.csv # draw saved rows only
//
// Each (op, size) point follows one method, shared with the peer harness
// (MPI, Gloo) so that the numbers compare directly:
//
//   - one verified iteration: every rank fills deterministic inputs, runs the
//     collective once and counts the elements that differ from the exact
//     expected result (the #wrong column, summed over ranks; each rank that
//     finds any prints an ERROR line on stderr and the command exits with
//     status 3 at the end);
//   - warm-up: 20 iterations up to 64 KiB, 4 up to 8 MiB, else 1 (or
//     -warmup), which also estimates the cost of one call (maximum over
//     ranks);
//   - a timed loop of -iters iterations, or as many as fill about -T
//     (between 3 and 20000); each rank times its own loop and the reported
//     time is the mean over ranks of the per-rank average; the median is
//     the mean over ranks of each rank's median call, read from laps of
//     the loop (about 2 µs of calls each, one call when longer), and each
//     rank's CPU at the start and end of the loop tells whether two ranks
//     of one host took turns on one CPU (a WARN line);
//   - algbw = bytes / time (GB/s = 1e9 B/s), busbw = algbw × the nccl-tests
//     factor of the op.
//
// Sizes run from -b to -e, multiplying by -f and always ending on -e. The
// bytes column follows nccl-tests: the per-rank buffer for allreduce,
// reduce and broadcast, the whole receive buffer (ranks × per-rank) for
// allgather, the whole send buffer for reducescatter and alltoall, 0 for
// barrier; element counts are rounded down to whole elements per rank
// (at least one), and the bytes column reports what was actually moved.
//
// Without HCOMM_RANK in the environment perf starts -n ranks as processes
// through the launcher (`hcomm run`), or as goroutines with -local; started
// as a rank of a job by another launcher (hcomm run, mpirun, srun), it is
// one rank and rank 0 prints the rows.

// perfOps lists the collectives perf measures, in the order of -op all.
var perfOps = []string{"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "barrier"}

// perfEmitEnv, when set to "json" in a rank's environment, makes rank 0
// print its rows as JSON lines for the perf process that started the job,
// which formats, plots and shows progress itself.
const perfEmitEnv = "HCOMM_PERF_EMIT"

// exitWrong is perf's exit status when a verified iteration found wrong
// elements (the peer harness uses the same status).
const exitWrong = 3

// wrongError reports that verified iterations found wrong elements.
type wrongError struct{ points int }

func (e wrongError) Error() string {
	return fmt.Sprintf("%d measured point(s) had wrong results (see the ERROR lines)", e.points)
}

// jobError is a failed job of ranks started by perf.
type jobError struct{ status int }

func (e jobError) Error() string { return fmt.Sprintf("the job failed (status %d)", e.status) }

// perf is the `hcomm perf` command. Wrong results make it fail with an
// exitError of status 3, as the peer harness expects.
func perf(args []string, stdout, stderr io.Writer) error {
	return perfExit(perfMain(args, stdout, stderr))
}

// perfExit gives perf's error its exit status.
func perfExit(err error) error {
	var we wrongError
	var je jobError
	switch {
	case errors.As(err, &we):
		return exitError{exitWrong, fmt.Errorf("perf: %w", err)}
	case errors.As(err, &je) && je.status == exitWrong:
		return exitError{exitWrong, errors.New("perf: wrong results")}
	case errors.Is(err, flag.ErrHelp):
		return nil
	}
	return err
}

// what says how the ranks of a sweep perf starts itself run and talk.
func (pc *perfConfig) what() string {
	switch {
	case pc.local || pc.n == 1:
		return "goroutines, in-process transport"
	case pc.trans == "shm" || pc.trans == "tcp":
		return "processes, transport " + pc.trans
	}
	// The ranks all run on this host, where auto picks shared memory.
	return "processes, transport shm (auto)"
}

// rankTransport says which transport a rank of a job started by another
// launcher uses, as far as its environment tells.
func rankTransport() string {
	if t := os.Getenv("HCOMM_TRANSPORT"); t != "" && t != "auto" {
		return t
	}
	return "auto (shm within a host, tcp between hosts)"
}

// perfMain runs perf and returns its error.
func perfMain(args []string, stdout, stderr io.Writer) error {
	pc, err := parsePerfFlags(args, stderr)
	if err != nil {
		return err
	}
	if len(pc.replot) > 0 {
		return replot(pc, stderr)
	}
	ctx := context.Background()
	if os.Getenv("HCOMM_RANK") != "" {
		// A rank of a job that perf or another launcher started.
		if len(pc.algos) > 1 {
			return errors.New("a rank of a job measures one -algo setting")
		}
		cfg := &hcomm.Config{Algo: pc.algos[0], ChunkBytes: pc.chunk, Timeout: -1}
		c, err := hcomm.Init(ctx, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		var sink func(row)
		var rp *reporter
		if c.Rank() == 0 {
			if os.Getenv(perfEmitEnv) == "json" {
				enc := json.NewEncoder(stdout)
				sink = func(r row) { enc.Encode(r) }
			} else {
				rp = newReporter(pc, c.Size(), "processes, transport "+rankTransport(), stdout, stderr)
				sink = rp.add
			}
		}
		err = runPerf(ctx, c, pc, pc.algos[0], sink, stderr, false)
		if rp != nil {
			err = errors.Join(err, rp.close())
		}
		return err
	}
	rp := newReporter(pc, pc.n, pc.what(), stdout, stderr)
	for _, algo := range pc.algos {
		if err = measureJob(ctx, pc, algo, rp, stderr); err != nil {
			break
		}
	}
	return errors.Join(err, rp.close())
}
