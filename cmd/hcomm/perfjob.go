package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/hcomm-go/hcomm"
)

// Running a sweep as a job: ranks started through the launcher, or goroutines.

// measureJob runs one sweep with one algorithm setting: as a job of pc.n
// processes, or as goroutines.
func measureJob(ctx context.Context, pc *perfConfig, algo string, rp *reporter, stderr io.Writer) error {
	if !pc.local && pc.n > 1 {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		argv := append(launchArgs(pc), self, "perf")
		argv = append(argv, childArgs(pc, algo)...)
		rows := &rowWriter{rp: rp}
		code := runCmd(argv, rows, rp.passThrough())
		rows.flush()
		if code != 0 {
			return jobError{code}
		}
		return rows.wrong()
	}
	cfg := &hcomm.Config{Algo: algo, ChunkBytes: pc.chunk, Timeout: -1}
	comms, err := hcomm.NewLocal(ctx, pc.n, cfg)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, pc.n)
	errOut := rp.passThrough()
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			var sink func(row)
			if c.Rank() == 0 {
				sink = rp.add
			}
			errs[c.Rank()] = runPerf(ctx, c, pc, algo, sink, errOut, true)
			var we wrongError
			if err := errs[c.Rank()]; err != nil && !errors.As(err, &we) {
				c.Abort(err) // so that the other ranks fail too instead of waiting
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// launchArgs is the command line of the launcher (hcomm run) that starts
// the ranks of a job perf measures, up to the program: the rank count, and
// the ranks' settings as -x variables, so that they reach the ranks'
// environment (exec.Cmd.Env) without changing perf's own.
func launchArgs(pc *perfConfig) []string {
	a := []string{"-n", strconv.Itoa(pc.n), "-x", perfEmitEnv + "=json"}
	if pc.trans != "" {
		a = append(a, "-x", "HCOMM_TRANSPORT="+pc.trans)
	}
	return append(a, "--")
}

// childArgs is the command line of the ranks of a job perf starts: what
// they measure, not how the rows are shown.
func childArgs(pc *perfConfig, algo string) []string {
	a := []string{
		"-op", strings.Join(pc.ops, ","),
		"-b", strconv.FormatInt(pc.minB, 10),
		"-e", strconv.FormatInt(pc.maxB, 10),
		"-f", strconv.FormatInt(pc.factor, 10),
		"-iters", strconv.Itoa(pc.iters),
		"-warmup", strconv.Itoa(pc.warmup),
		"-T", pc.target.String(),
		"-lap", pc.lap.String(),
		"-S", pc.maxOp.String(),
		"-chunk", strconv.Itoa(pc.chunk),
		"-inplace", inPlaceFlag{&pc.modes}.String(),
		"-dtype", pc.dtype.String(),
		"-redop", pc.redop.String(),
		"-label", pc.label,
		"-progress=false",
	}
	if algo != "" {
		a = append(a, "-algo", algo)
	}
	if pc.registered {
		a = append(a, "-registered")
	}
	return a
}

// rowWriter receives the standard output of a job's ranks: JSON rows go to
// the reporter, anything else passes through.
type rowWriter struct {
	rp      *reporter
	buf     []byte
	nWrong  int
	badRows int
}

func (w *rowWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.line(w.buf[:i+1])
		w.buf = w.buf[i+1:]
	}
}

func (w *rowWriter) line(l []byte) {
	var r row
	if bytes.HasPrefix(l, []byte("{")) && json.Unmarshal(l, &r) == nil && r.Op != "" {
		if r.Wrong != 0 {
			w.nWrong++
		}
		w.rp.add(r)
		return
	}
	w.rp.raw(l)
}

func (w *rowWriter) flush() {
	if len(w.buf) > 0 {
		w.line(append(w.buf, '\n'))
		w.buf = nil
	}
}

func (w *rowWriter) wrong() error {
	if w.nWrong > 0 {
		return wrongError{w.nWrong}
	}
	return nil
}
