package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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
//     time is the mean over ranks of the per-rank average;
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

// Timing rules of the method (see above).
const (
	minTimedIters = 3
	maxTimedIters = 20000
)

// perfConfig is what one perf invocation measures and how it reports.
type perfConfig struct {
	n       int
	nSet    bool // -n was given (a filter for -replot)
	local   bool
	trans   string
	ops     []string
	minB    int64
	maxB    int64
	factor  int64
	iters   int
	warmup  int
	target  time.Duration
	maxOp   time.Duration
	algos   []string // one sweep per entry; "" means the cost model
	chunk   int
	modes   []bool // in-place settings to run, in order
	dtype   hcomm.DType
	redop   hcomm.Op
	format  string // "text", "csv" or "json"
	header  bool
	label   string
	plot    string
	replot  []string
	verbose progressMode
}

// progressMode says when perf draws its progress line.
type progressMode int

const (
	progressAuto progressMode = iota // when standard error is a terminal
	progressOn
	progressOff
)

// String implements flag.Value.
func (m *progressMode) String() string {
	switch *m {
	case progressOn:
		return "true"
	case progressOff:
		return "false"
	}
	return "auto"
}

// Set implements flag.Value.
func (m *progressMode) Set(s string) error {
	if s == "auto" {
		*m = progressAuto
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true, false or auto")
	}
	*m = map[bool]progressMode{true: progressOn, false: progressOff}[b]
	return nil
}

// IsBoolFlag lets -progress stand alone.
func (m *progressMode) IsBoolFlag() bool { return true }

// inPlaceFlag is -inplace: false, true or both.
type inPlaceFlag struct{ modes *[]bool }

func (f inPlaceFlag) String() string {
	if f.modes == nil {
		return "false"
	}
	switch {
	case len(*f.modes) == 2:
		return "both"
	case len(*f.modes) == 1 && (*f.modes)[0]:
		return "true"
	}
	return "false"
}

func (f inPlaceFlag) Set(s string) error {
	if s == "both" {
		*f.modes = []bool{false, true}
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true, false or both")
	}
	*f.modes = []bool{b}
	return nil
}

// inPlaceArgs lets -inplace stand alone (meaning true) while
// "-inplace both" also works: a bare -inplace not followed by one of its
// values becomes -inplace=true.
func inPlaceArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if a == "-inplace" || a == "--inplace" {
			next := ""
			if i+1 < len(args) {
				next = args[i+1]
			}
			if _, err := strconv.ParseBool(next); err != nil && next != "both" {
				a += "=true"
			}
		}
		out = append(out, a)
	}
	return out
}

// secondsFlag is a duration written as Go duration ("200ms") or as plain
// seconds ("0.2"), as the peer harness passes it.
type secondsFlag struct{ d *time.Duration }

func (f secondsFlag) String() string {
	if f.d == nil {
		return "0s"
	}
	return f.d.String()
}

func (f secondsFlag) Set(s string) error {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if v < 0 || v > 1e6 || math.IsNaN(v) {
			return errors.New("out of range")
		}
		*f.d = time.Duration(v * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return errors.New("want seconds (0.2) or a duration (200ms)")
	}
	*f.d = d
	return nil
}

// listFlag collects the values of a repeatable flag.
type listFlag struct{ list *[]string }

func (f listFlag) String() string {
	if f.list == nil {
		return ""
	}
	return strings.Join(*f.list, " ")
}

func (f listFlag) Set(s string) error {
	*f.list = append(*f.list, s)
	return nil
}

// dtypes are the element types -dtype accepts, by name.
var dtypes = []hcomm.DType{hcomm.DTypeInt8, hcomm.DTypeUint8, hcomm.DTypeInt32, hcomm.DTypeUint32,
	hcomm.DTypeInt64, hcomm.DTypeUint64, hcomm.DTypeFloat16, hcomm.DTypeBFloat16,
	hcomm.DTypeFloat32, hcomm.DTypeFloat64}

var dtypeAliases = map[string]hcomm.DType{
	"float": hcomm.DTypeFloat32, "fp32": hcomm.DTypeFloat32, "double": hcomm.DTypeFloat64,
	"fp64": hcomm.DTypeFloat64, "half": hcomm.DTypeFloat16, "fp16": hcomm.DTypeFloat16,
	"bf16": hcomm.DTypeBFloat16, "int": hcomm.DTypeInt32, "char": hcomm.DTypeInt8,
}

func parseDType(s string) (hcomm.DType, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if d, ok := dtypeAliases[s]; ok {
		return d, nil
	}
	for _, d := range dtypes {
		if d.String() == s {
			return d, nil
		}
	}
	names := make([]string, len(dtypes))
	for i, d := range dtypes {
		names[i] = d.String()
	}
	return 0, fmt.Errorf("-dtype %q: want one of %s", s, strings.Join(names, ", "))
}

var redops = []hcomm.Op{hcomm.Sum, hcomm.Prod, hcomm.Min, hcomm.Max, hcomm.Avg}

func parseRedop(s string) (hcomm.Op, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for _, o := range redops {
		if o.String() == s {
			return o, nil
		}
	}
	return 0, fmt.Errorf("-redop %q: want sum, prod, min, max or avg", s)
}

const perfUsage = `usage: hcomm perf [flags]

Measures collectives nccl-tests style: for each op and size, a verified
iteration, warm-up, a timed loop; rows of size, count, type, time (µs, mean
over ranks of the per-rank average), algbw and busbw (GB/s, nccl-tests
factors) and #wrong. -dtype and -redop apply to allreduce, reduce and
reducescatter; the other collectives move bytes. Flags:
`

// parsePerfFlags parses perf's command line.
func parsePerfFlags(args []string, stderr io.Writer) (*perfConfig, error) {
	fs := flag.NewFlagSet("perf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, perfUsage)
		fs.PrintDefaults()
	}
	pc := &perfConfig{target: 200 * time.Millisecond, maxOp: 3 * time.Second, modes: []bool{false}}
	var ops, minB, maxB, dtype, redop, replot string
	var csv, jsonOut, noHeader bool
	fs.IntVar(&pc.n, "n", 2, "number of ranks (processes started through hcomm run, or goroutines with -local)")
	fs.BoolVar(&pc.local, "local", false, "run the ranks as goroutines of this process instead of separate processes")
	fs.StringVar(&pc.trans, "transport", "", "force the transport between processes: shm or tcp (HCOMM_TRANSPORT)")
	fs.StringVar(&ops, "op", "allreduce", "collective(s), comma-separated, or all: "+strings.Join(perfOps, ","))
	fs.StringVar(&minB, "b", "8", "smallest size (bytes; K/M/G suffixes)")
	fs.StringVar(&maxB, "e", "64M", "largest size")
	fs.Int64Var(&pc.factor, "f", 4, "size multiplication factor between rows")
	fs.IntVar(&pc.iters, "iters", 0, "timed iterations per size (0: as many as fit in -T, 3 to 20000)")
	fs.IntVar(&pc.warmup, "warmup", 0, "warm-up iterations per size (0: 20 up to 64 KiB, 4 up to 8 MiB, else 1)")
	fs.Var(secondsFlag{&pc.target}, "T", "target duration of the timed loop per size: seconds (0.2) or a duration (200ms)")
	fs.Var(secondsFlag{&pc.maxOp}, "S", "skip the larger sizes of an op once one call takes longer than this")
	fs.Var(listFlag{&pc.algos}, "algo", "force algorithms, HCOMM_ALGO syntax (allreduce=ring,...); repeat for one sweep per setting, auto for the cost model")
	fs.IntVar(&pc.chunk, "chunk", 0, "pipelining chunk bytes (0: HCOMM_BUFFSIZE or default)")
	fs.Var(inPlaceFlag{&pc.modes}, "inplace", "run in place (true or bare -inplace), out of place (false) or both, like nccl-tests' two column groups")
	fs.StringVar(&dtype, "dtype", "float32", "element type of the reducing collectives")
	fs.StringVar(&redop, "redop", "sum", "reduction of the reducing collectives: sum, prod, min, max, avg")
	fs.BoolVar(&csv, "csv", false, "print rows as impl,op,ranks,bytes,usec,algbw_GBps,busbw_GBps (the peer harness's format)")
	fs.BoolVar(&jsonOut, "json", false, "print one JSON object per row")
	fs.BoolVar(&noHeader, "H", false, "no header line")
	fs.StringVar(&pc.label, "label", "hcomm", "implementation label of the rows (impl column, plot legend)")
	fs.StringVar(&pc.plot, "plot", "", "also draw busbw against size into this SVG file")
	fs.StringVar(&replot, "replot", "", "draw -plot from these saved -csv/-json files (comma-separated) instead of measuring")
	fs.Var(&pc.verbose, "progress", "progress line on stderr: true, false or auto (when stderr is a terminal)")
	if err := fs.Parse(inPlaceArgs(args)); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "n" {
			pc.nSet = true
		}
	})
	if pc.n < 1 {
		return nil, fmt.Errorf("-n %d: need at least one rank", pc.n)
	}
	var err error
	if pc.minB, err = parseSize(minB); err != nil {
		return nil, fmt.Errorf("-b: %w", err)
	}
	if pc.maxB, err = parseSize(maxB); err != nil {
		return nil, fmt.Errorf("-e: %w", err)
	}
	if pc.minB < 1 {
		return nil, fmt.Errorf("-b %s: need at least 1 byte", minB)
	}
	if pc.maxB < pc.minB {
		return nil, fmt.Errorf("-e %s is below -b %s", maxB, minB)
	}
	if pc.factor < 2 {
		return nil, fmt.Errorf("-f %d: need at least 2", pc.factor)
	}
	if pc.iters < 0 || pc.warmup < 0 || pc.chunk < 0 {
		return nil, errors.New("-iters, -warmup and -chunk must not be negative")
	}
	if pc.trans != "" && pc.trans != "shm" && pc.trans != "tcp" && pc.trans != "auto" {
		return nil, fmt.Errorf("-transport %q: want shm, tcp or auto", pc.trans)
	}
	if ops == "all" {
		pc.ops = perfOps
	} else {
		for _, op := range strings.Split(ops, ",") {
			op = strings.ToLower(strings.TrimSpace(op))
			if _, ok := benchOps[op]; !ok {
				return nil, fmt.Errorf("-op %q: want one of %s or all", op, strings.Join(perfOps, ","))
			}
			if !slices.Contains(pc.ops, op) {
				pc.ops = append(pc.ops, op)
			}
		}
	}
	if pc.dtype, err = parseDType(dtype); err != nil {
		return nil, err
	}
	if pc.redop, err = parseRedop(redop); err != nil {
		return nil, err
	}
	if len(pc.algos) == 0 {
		pc.algos = []string{""}
	}
	for i, a := range pc.algos {
		if a == "auto" {
			pc.algos[i] = ""
		}
	}
	switch {
	case csv && jsonOut:
		return nil, errors.New("-csv and -json exclude each other")
	case csv:
		pc.format = "csv"
	case jsonOut:
		pc.format = "json"
	default:
		pc.format = "text"
	}
	pc.header = !noHeader
	if replot != "" {
		if pc.plot == "" {
			return nil, errors.New("-replot needs -plot FILE.svg")
		}
		for _, f := range strings.Split(replot, ",") {
			if f = strings.TrimSpace(f); f != "" {
				pc.replot = append(pc.replot, f)
			}
		}
	}
	return pc, nil
}

// parseSize reads a byte count with an optional K, M or G (binary) suffix.
func parseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	switch {
	case strings.HasSuffix(t, "K"):
		mult, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "M"):
		mult, t = 1<<20, t[:len(t)-1]
	case strings.HasSuffix(t, "G"):
		mult, t = 1<<30, t[:len(t)-1]
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > math.MaxInt64/mult {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mult, nil
}

// sizes returns the requested sizes of op: -b, then ×-f while below -e,
// always ending on -e; barrier has the one size 0.
func (pc *perfConfig) sizes(op string) []int64 {
	if op == "barrier" {
		return []int64{0}
	}
	s := []int64{pc.minB}
	for v := pc.minB; v < pc.maxB; {
		if v > pc.maxB/pc.factor {
			v = pc.maxB
		} else {
			v = min(v*pc.factor, pc.maxB)
		}
		s = append(s, v)
	}
	return s
}

// points is the number of rows a full sweep prints.
func (pc *perfConfig) points() int {
	n := 0
	for _, op := range pc.ops {
		n += len(pc.sizes(op))
	}
	return n * len(pc.modes) * len(pc.algos)
}

// wrongError reports that verified iterations found wrong elements.
type wrongError struct{ points int }

func (e wrongError) Error() string {
	return fmt.Sprintf("%d measured point(s) had wrong results (see the ERROR lines)", e.points)
}

// jobError is a failed job of ranks started by perf.
type jobError struct{ status int }

func (e jobError) Error() string { return fmt.Sprintf("the job failed (status %d)", e.status) }

// perf is the `hcomm perf` command. Wrong results end the process with
// status 3, as the peer harness expects.
func perf(args []string, stdout, stderr io.Writer) error {
	err := perfMain(args, stdout, stderr)
	var we wrongError
	var je jobError
	switch {
	case errors.As(err, &we):
		fmt.Fprintln(stderr, "hcomm perf:", err)
		os.Exit(exitWrong)
	case errors.As(err, &je) && je.status == exitWrong:
		fmt.Fprintln(stderr, "hcomm perf: wrong results")
		os.Exit(exitWrong)
	case errors.Is(err, flag.ErrHelp):
		return nil
	}
	return err
}

// perfMain runs perf and returns its error.
func perfMain(args []string, stdout, stderr io.Writer) error {
	pc, err := parsePerfFlags(args, stderr)
	if err != nil {
		return err
	}
	if len(pc.replot) > 0 {
		return replot(pc)
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
				rp = newReporter(pc, c.Size(), "processes", stdout, stderr)
				sink = rp.add
			}
		}
		err = runPerf(ctx, c, pc, pc.algos[0], sink, stderr)
		if rp != nil {
			err = errors.Join(err, rp.close())
		}
		return err
	}
	what := "goroutines"
	if !pc.local && pc.n > 1 {
		what = "processes"
		if pc.trans != "" {
			what += ", " + pc.trans
		}
	}
	rp := newReporter(pc, pc.n, what, stdout, stderr)
	for _, algo := range pc.algos {
		if err = measureJob(ctx, pc, algo, rp, stderr); err != nil {
			break
		}
	}
	return errors.Join(err, rp.close())
}

// measureJob runs one sweep with one algorithm setting: as a job of pc.n
// processes, or as goroutines.
func measureJob(ctx context.Context, pc *perfConfig, algo string, rp *reporter, stderr io.Writer) error {
	if !pc.local && pc.n > 1 {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		if pc.trans != "" {
			os.Setenv("HCOMM_TRANSPORT", pc.trans)
		}
		os.Setenv(perfEmitEnv, "json")
		defer os.Unsetenv(perfEmitEnv)
		argv := append([]string{"-n", strconv.Itoa(pc.n), "--", self, "perf"}, childArgs(pc, algo)...)
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
			errs[c.Rank()] = runPerf(ctx, c, pc, algo, sink, errOut)
			var we wrongError
			if err := errs[c.Rank()]; err != nil && !errors.As(err, &we) {
				c.Abort(err) // so that the other ranks fail too instead of waiting
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
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

// row is one measured point.
type row struct {
	Impl    string  `json:"impl"`
	Op      string  `json:"op"`
	Ranks   int     `json:"ranks"`
	Bytes   int64   `json:"bytes"`
	Count   int64   `json:"count"`
	Type    string  `json:"type"`
	Redop   string  `json:"redop,omitempty"`
	Root    int     `json:"root"`
	Algo    string  `json:"algo,omitempty"`
	InPlace bool    `json:"in_place"`
	Iters   int64   `json:"iters"`
	Usec    float64 `json:"usec"`
	AlgBW   float64 `json:"algbw_GBps"`
	BusBW   float64 `json:"busbw_GBps"`
	Wrong   int64   `json:"wrong"`
}

// csvLine is r in the peer harness's format.
func (r row) csvLine() string {
	return fmt.Sprintf("%s,%s,%d,%d,%.3f,%.4f,%.4f", r.Impl, r.Op, r.Ranks, r.Bytes, r.Usec, r.AlgBW, r.BusBW)
}

// runPerf runs the sweep on this rank. Rank 0 passes each row to sink;
// other ranks pass a nil sink. Ranks that find wrong elements print an
// ERROR line on errOut.
func runPerf(ctx context.Context, c *hcomm.Comm, pc *perfConfig, algo string, sink func(row), errOut io.Writer) error {
	if err := settle(ctx, c, settleFor); err != nil {
		return fmt.Errorf("settling: %w", err)
	}
	wrongPoints := 0
	for _, op := range pc.ops {
	sizes:
		for _, size := range pc.sizes(op) {
			for _, inPlace := range pc.modes {
				r, est, err := measure(ctx, c, pc, op, size, inPlace, errOut)
				if err != nil {
					return fmt.Errorf("%s %d B: %w", op, size, err)
				}
				r.Algo = algo
				if r.Wrong != 0 {
					wrongPoints++
				}
				if sink != nil {
					sink(r)
				}
				if pc.maxOp > 0 && est > pc.maxOp && size < pc.maxB {
					if c.Rank() == 0 {
						fmt.Fprintf(errOut, "NOTE impl=%s op=%s ranks=%d: %.2f s per op at %d bytes > -S %v, larger sizes skipped\n",
							pc.label, op, c.Size(), est.Seconds(), r.Bytes, pc.maxOp)
					}
					break sizes
				}
			}
		}
	}
	if wrongPoints > 0 {
		return wrongError{wrongPoints}
	}
	return nil
}

// measure runs one op at one size on this rank and returns the row, with
// time and wrong counts aggregated over the ranks, and the estimated
// duration of one call (maximum over ranks).
func measure(ctx context.Context, c *hcomm.Comm, pc *perfConfig, op string, size int64, inPlace bool, errOut io.Writer) (row, time.Duration, error) {
	bo := benchOps[op]
	b := bo.setup(c, size, inPlace, pc.dtype, pc.redop)
	// Collect the garbage of setting up (this point's buffers, the last
	// point's, Init's) now, so that no collection runs during the timed
	// loop: the collectives themselves do not allocate.
	runtime.GC()
	// 1. One verified iteration.
	b.fill()
	if err := c.Barrier(ctx); err != nil {
		return row{}, 0, err
	}
	if err := b.run(ctx); err != nil {
		return row{}, 0, err
	}
	wrong := []int64{b.wrong()}
	if wrong[0] != 0 {
		fmt.Fprintf(errOut, "ERROR impl=%s op=%s ranks=%d bytes=%d rank=%d: %d wrong elements\n",
			pc.label, op, c.Size(), b.bytes, c.Rank(), wrong[0])
	}
	if err := hcomm.AllReduce(ctx, c, wrong, wrong, hcomm.Sum); err != nil {
		return row{}, 0, err
	}
	// 2. Warm-up, which also estimates the cost of one call.
	warm := pc.warmup
	if warm == 0 {
		warm = defaultWarmup(b.bytes)
	}
	if err := c.Barrier(ctx); err != nil {
		return row{}, 0, err
	}
	start := time.Now()
	for range warm {
		if err := b.run(ctx); err != nil {
			return row{}, 0, err
		}
	}
	est := []float64{time.Since(start).Seconds() / float64(warm)}
	if err := hcomm.AllReduce(ctx, c, est, est, hcomm.Max); err != nil {
		return row{}, 0, err
	}
	iters := int64(pc.iters)
	if iters == 0 {
		iters = timedIters(pc.target, est[0])
	}
	// 3. The timed loop.
	if err := c.Barrier(ctx); err != nil {
		return row{}, 0, err
	}
	start = time.Now()
	for range iters {
		if err := b.run(ctx); err != nil {
			return row{}, 0, err
		}
	}
	usec := []float64{time.Since(start).Seconds() * 1e6 / float64(iters)}
	if err := hcomm.AllReduce(ctx, c, usec, usec, hcomm.Sum); err != nil {
		return row{}, 0, err
	}
	r := row{Impl: pc.label, Op: op, Ranks: c.Size(), Bytes: b.bytes, Count: b.count, Type: b.typ,
		Redop: b.redop, Root: b.root, InPlace: inPlace, Iters: iters,
		Usec: usec[0] / float64(c.Size()), Wrong: wrong[0]}
	r.AlgBW, r.BusBW = bandwidths(r.Bytes, r.Usec, bo.factor(c.Size()))
	return r, time.Duration(est[0] * float64(time.Second)), nil
}

// settleFor is how long the ranks exchange barriers before the first
// point. Freshly started processes run slower for some milliseconds, until
// the kernel has spread the busy threads over the CPUs; without this the
// first point (the 8-byte one, whose timed loop lasts only a few
// milliseconds) measured that instead of the library.
const settleFor = 50 * time.Millisecond

// settle runs Barriers for about d, the same number on every rank.
func settle(ctx context.Context, c *hcomm.Comm, d time.Duration) error {
	start := time.Now()
	done := []int32{0}
	for {
		for range 256 {
			if err := c.Barrier(ctx); err != nil {
				return err
			}
		}
		done[0] = 0
		if time.Since(start) >= d {
			done[0] = 1
		}
		if err := hcomm.AllReduce(ctx, c, done, done, hcomm.Max); err != nil {
			return err
		}
		if done[0] != 0 {
			return nil
		}
	}
}

// defaultWarmup is the number of warm-up iterations for a point of the
// given size.
func defaultWarmup(bytes int64) int {
	switch {
	case bytes <= 64<<10:
		return 20
	case bytes <= 8<<20:
		return 4
	}
	return 1
}

// timedIters is the length of a timed loop lasting about target when one
// call takes est seconds.
func timedIters(target time.Duration, est float64) int64 {
	n := target.Seconds() / max(est, 1e-9)
	return int64(min(max(n, minTimedIters), maxTimedIters))
}

// bandwidths returns algbw and busbw in GB/s for bytes moved in usec.
func bandwidths(bytes int64, usec, factor float64) (alg, bus float64) {
	if usec <= 0 || bytes == 0 {
		return 0, 0
	}
	alg = float64(bytes) / usec / 1e3
	return alg, alg * factor
}

// benchOp is one collective perf can measure.
type benchOp struct {
	// setup allocates the buffers of one point and returns how to run
	// and check it.
	setup func(c *hcomm.Comm, size int64, inPlace bool, dt hcomm.DType, op hcomm.Op) bench
	// factor is the nccl-tests bus bandwidth factor for n ranks.
	factor func(n int) float64
}

// bench is one point: its reported size, the call, and its check.
type bench struct {
	bytes, count int64
	typ, redop   string
	root         int
	run          func(ctx context.Context) error
	fill         func()
	wrong        func() int64
}

func ringFactor(n int) float64 { return float64(n-1) / float64(n) }

var benchOps = map[string]benchOp{
	"allreduce":     {setupReducing("allreduce"), func(n int) float64 { return 2 * ringFactor(n) }},
	"allgather":     {setupAllGather, ringFactor},
	"reducescatter": {setupReducing("reducescatter"), ringFactor},
	"broadcast":     {setupBroadcast, func(int) float64 { return 1 }},
	"reduce":        {setupReducing("reduce"), func(int) float64 { return 1 }},
	"alltoall":      {setupAllToAll, ringFactor},
	"barrier":       {setupBarrier, func(int) float64 { return 0 }},
}

// patternByte is rank r's byte i for the collectives that move bytes.
func patternByte(r, i int) byte { return byte(r*131 + i*7 + 1) }

// elemCount is a requested size in whole elements of esize bytes, per
// unit ranks, at least one.
func elemCount(size int64, esize, unit int) int64 {
	return max(size/int64(esize)/int64(unit), 1)
}

func setupAllGather(c *hcomm.Comm, size int64, inPlace bool, _ hcomm.DType, _ hcomm.Op) bench {
	n := int64(c.Size())
	per := elemCount(size, 1, c.Size())
	recv := make([]byte, per*n)
	send := make([]byte, per)
	if inPlace {
		send = recv[int64(c.Rank())*per : int64(c.Rank()+1)*per]
	}
	return bench{bytes: per * n, count: per, typ: "uint8", root: -1,
		run: func(ctx context.Context) error { return hcomm.AllGather(ctx, c, send, recv) },
		fill: func() {
			clear(recv)
			for i := range send {
				send[i] = patternByte(c.Rank(), i)
			}
		},
		wrong: func() (w int64) {
			for i, v := range recv {
				if v != patternByte(i/int(per), i%int(per)) {
					w++
				}
			}
			return w
		}}
}

func setupBroadcast(c *hcomm.Comm, size int64, _ bool, _ hcomm.DType, _ hcomm.Op) bench {
	n := max(size, 1)
	buf := make([]byte, n)
	return bench{bytes: n, count: n, typ: "uint8", root: 0,
		run: func(ctx context.Context) error { return hcomm.Broadcast(ctx, c, buf, 0) },
		fill: func() {
			for i := range buf {
				buf[i] = 0
				if c.Rank() == 0 {
					buf[i] = patternByte(0, i)
				}
			}
		},
		wrong: func() (w int64) {
			for i, v := range buf {
				if v != patternByte(0, i) {
					w++
				}
			}
			return w
		}}
}

// alltoallByte is the byte i that rank src sends to rank dst.
func alltoallByte(src, dst, i int) byte { return byte(src*37 + dst*11 + i*5 + 3) }

func setupAllToAll(c *hcomm.Comm, size int64, inPlace bool, _ hcomm.DType, _ hcomm.Op) bench {
	n := int64(c.Size())
	per := elemCount(size, 1, c.Size())
	send := make([]byte, per*n)
	recv := make([]byte, per*n)
	if inPlace {
		recv = send
	}
	return bench{bytes: per * n, count: per, typ: "uint8", root: -1,
		run: func(ctx context.Context) error { return hcomm.AllToAll(ctx, c, send, recv) },
		fill: func() {
			clear(recv)
			for i := range send {
				send[i] = alltoallByte(c.Rank(), i/int(per), i%int(per))
			}
		},
		wrong: func() (w int64) {
			for i, v := range recv {
				if v != alltoallByte(i/int(per), c.Rank(), i%int(per)) {
					w++
				}
			}
			return w
		}}
}

func setupBarrier(c *hcomm.Comm, _ int64, _ bool, _ hcomm.DType, _ hcomm.Op) bench {
	return bench{typ: "-", root: -1,
		run:   func(ctx context.Context) error { return c.Barrier(ctx) },
		fill:  func() {},
		wrong: func() int64 { return 0 }}
}

// setupReducing returns the setup of a reducing collective ("allreduce",
// "reduce" or "reducescatter") for any element type.
func setupReducing(kind string) func(*hcomm.Comm, int64, bool, hcomm.DType, hcomm.Op) bench {
	return func(c *hcomm.Comm, size int64, inPlace bool, dt hcomm.DType, op hcomm.Op) bench {
		switch dt {
		case hcomm.DTypeInt8:
			return reducingBench(kind, c, size, inPlace, op, numArith[int8](false))
		case hcomm.DTypeUint8:
			return reducingBench(kind, c, size, inPlace, op, numArith[uint8](false))
		case hcomm.DTypeInt32:
			return reducingBench(kind, c, size, inPlace, op, numArith[int32](false))
		case hcomm.DTypeUint32:
			return reducingBench(kind, c, size, inPlace, op, numArith[uint32](false))
		case hcomm.DTypeInt64:
			return reducingBench(kind, c, size, inPlace, op, numArith[int64](false))
		case hcomm.DTypeUint64:
			return reducingBench(kind, c, size, inPlace, op, numArith[uint64](false))
		case hcomm.DTypeFloat16:
			return reducingBench(kind, c, size, inPlace, op, halfArith(hcomm.Float16From, hcomm.Float16.Float32))
		case hcomm.DTypeBFloat16:
			return reducingBench(kind, c, size, inPlace, op, halfArith(hcomm.BFloat16From, hcomm.BFloat16.Float32))
		case hcomm.DTypeFloat64:
			return reducingBench(kind, c, size, inPlace, op, numArith[float64](true))
		}
		return reducingBench(kind, c, size, inPlace, op, numArith[float32](true))
	}
}

// arith is the arithmetic of one element type that the checks need.
type arith[T hcomm.Element] struct {
	// class picks the input pattern: "int", "float" or "half".
	class    string
	of       func(int64) T
	add, mul func(a, b T) T
	less     func(a, b T) bool
	div      func(a T, n int) T
}

type number interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

func numArith[T number](float bool) arith[T] {
	a := arith[T]{class: "int",
		of:   func(x int64) T { return T(x) },
		add:  func(a, b T) T { return a + b },
		mul:  func(a, b T) T { return a * b },
		less: func(a, b T) bool { return a < b },
	}
	var zero T
	switch {
	case float:
		a.class = "float"
		a.div = func(x T, n int) T { return x / T(n) }
	case zero-1 < 0: // signed
		a.div = func(x T, n int) T { return T(int64(x) / int64(n)) }
	default:
		a.div = func(x T, n int) T { return T(uint64(x) / uint64(n)) }
	}
	return a
}

func halfArith[T hcomm.Float16 | hcomm.BFloat16](from func(float32) T, to func(T) float32) arith[T] {
	return arith[T]{class: "half",
		of:   func(x int64) T { return from(float32(x)) },
		add:  func(a, b T) T { return from(to(a) + to(b)) },
		mul:  func(a, b T) T { return from(to(a) * to(b)) },
		less: func(a, b T) bool { return to(a) < to(b) },
		div:  func(x T, n int) T { return from(to(x) / float32(n)) },
	}
}

// inputPeriod is the period, in elements, of every input pattern except
// the float product's.
const inputPeriod = 61

// patternPeriod is the period of the inputs of op over n ranks.
func patternPeriod(class string, op hcomm.Op, n int) int {
	switch {
	case class == "int":
		return 251
	case op == hcomm.Prod:
		return 3 * n * inputPeriod
	}
	return inputPeriod
}

// inputValue is rank r's input element i (of a pattern repeating every
// patternPeriod elements) for op over n ranks. Integer inputs are
// arbitrary, since integer arithmetic wraps exactly in any order. Floating
// point inputs are small integers chosen so that every partial result is
// exact in the type, whatever order the ranks' values are combined in:
// sums stay below 2^8 in magnitude for 16-bit floats at up to 64 ranks,
// products are ±1 or ±2, and the values averaged sum to n times an
// integer.
func inputValue(class string, op hcomm.Op, n, r, i int) int64 {
	if class == "int" {
		return int64(uint64(r*131+(i%251)*7+1) * 0x9E3779B97F4A7C15)
	}
	j := i % inputPeriod
	switch op {
	case hcomm.Prod:
		switch {
		case i%n == r:
			return 2
		case (r+i)%3 == 0:
			return -1
		}
		return 1
	case hcomm.Avg:
		// base(j) plus a per-rank offset; the offsets cancel in pairs.
		d := int64((r/2)%3 + 1)
		switch {
		case r%2 == 1:
			d = -d
		case r == n-1:
			d = 0
		}
		return int64(j%5-2) + d
	}
	if class == "half" {
		return int64((r+1)*(j+1)%9 - 4)
	}
	return int64((r+1)*(j%7+1) - 8 + j/7)
}

// reducingBench sets up allreduce, reduce or reducescatter of T values.
func reducingBench[T hcomm.Element](kind string, c *hcomm.Comm, size int64, inPlace bool, op hcomm.Op, a arith[T]) bench {
	var zero T
	esize := hcomm.DTypeOf[T]().Size()
	n, rank := c.Size(), c.Rank()
	period := patternPeriod(a.class, op, n)
	in := make([]T, period) // this rank's inputs over one period
	want := make([]T, period)
	for i := range period {
		in[i] = a.of(inputValue(a.class, op, n, rank, i))
		acc := a.of(inputValue(a.class, op, n, 0, i))
		for r := 1; r < n; r++ {
			v := a.of(inputValue(a.class, op, n, r, i))
			switch op {
			case hcomm.Prod:
				acc = a.mul(acc, v)
			case hcomm.Min:
				if a.less(v, acc) {
					acc = v
				}
			case hcomm.Max:
				if a.less(acc, v) {
					acc = v
				}
			default:
				acc = a.add(acc, v)
			}
		}
		if op == hcomm.Avg {
			acc = a.div(acc, n)
		}
		want[i] = acc
	}
	b := bench{typ: hcomm.DTypeOf[T]().String(), redop: op.String(), root: -1}
	var send, recv []T
	base := 0 // index of recv[0] in the full vector
	switch kind {
	case "allreduce", "reduce":
		b.count = elemCount(size, esize, 1)
		b.bytes = b.count * int64(esize)
		send = make([]T, b.count)
		if kind == "allreduce" || rank == 0 {
			recv = make([]T, b.count)
			if inPlace {
				recv = send
			}
		}
		if kind == "reduce" {
			b.root = 0
		}
	default: // reducescatter
		b.count = elemCount(size, esize, n)
		b.bytes = b.count * int64(n) * int64(esize)
		send = make([]T, b.count*int64(n))
		base = rank * int(b.count)
		recv = make([]T, b.count)
		if inPlace {
			recv = send[base : base+int(b.count)]
		}
	}
	switch kind {
	case "allreduce":
		b.run = func(ctx context.Context) error { return hcomm.AllReduce(ctx, c, send, recv, op) }
	case "reduce":
		b.run = func(ctx context.Context) error { return hcomm.Reduce(ctx, c, send, recv, op, 0) }
	default:
		b.run = func(ctx context.Context) error { return hcomm.ReduceScatter(ctx, c, send, recv, op) }
	}
	b.fill = func() {
		if !inPlace {
			for i := range recv {
				recv[i] = zero
			}
		}
		for i := range send {
			send[i] = in[i%period]
		}
	}
	b.wrong = func() (w int64) {
		for i, v := range recv {
			if v != want[(base+i)%period] {
				w++
			}
		}
		return w
	}
	return b
}

// reporter shows the rows of rank 0: as text, CSV or JSON on stdout, as a
// progress line on stderr, and in the plot.
type reporter struct {
	mu      sync.Mutex
	pc      *perfConfig
	out     io.Writer
	errOut  io.Writer
	header  bool // the header is still to be printed
	ranks   int
	what    string
	pending *row // an out-of-place row waiting for its in-place partner
	rows    []row
	prog    *progress
}

func newReporter(pc *perfConfig, ranks int, what string, out, errOut io.Writer) *reporter {
	rp := &reporter{pc: pc, out: out, errOut: errOut, header: pc.header, ranks: ranks, what: what}
	if pc.verbose == progressOn || pc.verbose == progressAuto && isTerminal(errOut) {
		rp.prog = newProgress(errOut, pc, &rp.mu)
	}
	return rp
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// add shows one row.
func (rp *reporter) add(r row) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.prog.clear()
	defer rp.prog.step(r)
	rp.rows = append(rp.rows, r)
	rp.printHeader()
	switch rp.pc.format {
	case "csv":
		fmt.Fprintln(rp.out, r.csvLine())
	case "json":
		b, _ := json.Marshal(r)
		fmt.Fprintln(rp.out, string(b))
	default:
		if len(rp.pc.modes) == 2 {
			if !r.InPlace {
				rp.pending = &r
				return
			}
			if p := rp.pending; p != nil && p.Op == r.Op && p.Bytes == r.Bytes {
				fmt.Fprintln(rp.out, textRow(p, &r))
			} else {
				fmt.Fprintln(rp.out, textRow(nil, &r))
			}
			rp.pending = nil
			return
		}
		fmt.Fprintln(rp.out, textRow(&r))
	}
}

func (rp *reporter) printHeader() {
	if !rp.header {
		return
	}
	rp.header = false
	switch rp.pc.format {
	case "csv":
		fmt.Fprintln(rp.out, "impl,op,ranks,bytes,usec,algbw_GBps,busbw_GBps")
	case "text":
		algo := "cost model"
		if len(rp.pc.algos) > 1 || rp.pc.algos[0] != "" {
			algo = strings.Join(rp.pc.algos, " | ")
		}
		fmt.Fprintf(rp.out, "# hcomm perf: %d ranks (%s), %s %s for reductions, algorithms: %s\n",
			rp.ranks, rp.what, rp.pc.dtype, rp.pc.redop, algo)
		groups, cols, units := "", "", ""
		for _, in := range rp.pc.modes {
			groups += " " + center(map[bool]string{false: "out-of-place", true: "in-place"}[in], 32)
			cols += fmt.Sprintf(" %9s %7s %7s %6s", "time", "algbw", "busbw", "#wrong")
			units += fmt.Sprintf(" %9s %7s %7s %6s", "(us)", "(GB/s)", "(GB/s)", "")
		}
		fmt.Fprintf(rp.out, "#%61s%s\n", "", groups)
		fmt.Fprintf(rp.out, "# %11s %12s %8s %6s %5s %13s%s\n", "size", "count", "type", "redop", "root", "op", cols)
		fmt.Fprintf(rp.out, "# %11s %12s %8s %6s %5s %13s%s\n", "(B)", "(elements)", "", "", "", "", units)
	}
}

// center pads s with blanks on both sides to width w.
func center(s string, w int) string {
	if len(s) >= w {
		return s
	}
	l := (w - len(s)) / 2
	return strings.Repeat(" ", l) + s + strings.Repeat(" ", w-len(s)-l)
}

// textRow formats a text row with one column group per given row (out of
// place, then in place); a nil row is a group of dashes.
func textRow(groups ...*row) string {
	var r *row
	for _, g := range groups {
		if g != nil {
			r = g
			break
		}
	}
	redop := r.Redop
	if redop == "" {
		redop = "-"
	}
	s := fmt.Sprintf("  %11d %12d %8s %6s %5d %13s", r.Bytes, r.Count, r.Type, redop, r.Root, r.Op)
	for _, x := range groups {
		if x == nil {
			s += fmt.Sprintf(" %9s %7s %7s %6s", "-", "-", "-", "-")
			continue
		}
		s += fmt.Sprintf(" %9s %7.3f %7.3f %6d", fmtUsec(x.Usec), x.AlgBW, x.BusBW, x.Wrong)
	}
	return s
}

// fmtUsec writes a time in µs with about four significant digits.
func fmtUsec(u float64) string {
	switch {
	case u >= 1e5:
		return strconv.FormatFloat(u, 'f', 0, 64)
	case u >= 1e3:
		return strconv.FormatFloat(u, 'f', 1, 64)
	}
	return strconv.FormatFloat(u, 'f', 2, 64)
}

// raw passes a line of the ranks' output that is not a row.
func (rp *reporter) raw(l []byte) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.prog.clear()
	rp.out.Write(l)
	rp.prog.draw()
}

// passThrough returns a writer for the ranks' standard error that keeps
// the progress line clear of their lines.
func (rp *reporter) passThrough() io.Writer {
	if rp.prog == nil {
		return &syncWriter{w: rp.errOut}
	}
	return writerFunc(func(p []byte) (int, error) {
		rp.mu.Lock()
		defer rp.mu.Unlock()
		rp.prog.clear()
		rp.errOut.Write(p)
		rp.prog.draw()
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// close flushes an unpaired row, ends the progress line and writes the
// plot.
func (rp *reporter) close() error {
	rp.mu.Lock()
	rp.prog.stop()
	if p := rp.pending; p != nil {
		fmt.Fprintln(rp.out, textRow(p, nil))
		rp.pending = nil
	}
	rows := rp.rows
	rp.mu.Unlock()
	if rp.pc.plot == "" || len(rows) == 0 {
		return nil
	}
	return writePlotFile(rp.pc.plot, plotTitle(rows), rows)
}

// progress is the line on stderr that tells a person how far a sweep is.
type progress struct {
	w     io.Writer
	mu    *sync.Mutex // the reporter's; held by every method's caller
	plan  []string    // what each point measures, in order
	done  int
	start time.Time
	shown bool
	quit  chan struct{}
}

func newProgress(w io.Writer, pc *perfConfig, mu *sync.Mutex) *progress {
	p := &progress{w: w, mu: mu, start: time.Now(), quit: make(chan struct{})}
	for _, algo := range pc.algos {
		for _, op := range pc.ops {
			for _, s := range pc.sizes(op) {
				for _, in := range pc.modes {
					desc := op
					if op != "barrier" {
						desc += " " + fmtBytes(s)
					}
					if len(pc.modes) == 2 && in {
						desc += " in place"
					}
					if algo != "" {
						desc += " [" + algo + "]"
					}
					p.plan = append(p.plan, desc)
				}
			}
		}
	}
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.mu.Lock()
				p.draw()
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// step counts a finished point and shows the next.
func (p *progress) step(row) {
	if p == nil {
		return
	}
	p.done++
	p.draw()
}

func (p *progress) draw() {
	if p == nil || p.done >= len(p.plan) {
		return
	}
	el := time.Since(p.start).Round(time.Second)
	fmt.Fprintf(p.w, "\r\x1b[K[%d/%d] %s  (%v)", p.done+1, len(p.plan), p.plan[p.done], el)
	p.shown = true
}

func (p *progress) clear() {
	if p == nil || !p.shown {
		return
	}
	fmt.Fprint(p.w, "\r\x1b[K")
	p.shown = false
}

func (p *progress) stop() {
	if p == nil {
		return
	}
	close(p.quit)
	p.clear()
}

// fmtBytes writes a size the way the tables do: 8 B, 32 KiB, 256 MiB.
func fmtBytes(b int64) string {
	for _, u := range []struct {
		name string
		div  int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b >= u.div && b%u.div == 0 {
			return strconv.FormatInt(b/u.div, 10) + " " + u.name
		}
	}
	return strconv.FormatInt(b, 10) + " B"
}

// readRows reads rows saved with -csv (or the peer harness's CSV files) or
// -json.
func readRows(r io.Reader) ([]row, error) {
	var rows []row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") || strings.HasPrefix(t, "impl,") {
			continue
		}
		var x row
		if strings.HasPrefix(t, "{") {
			if err := json.Unmarshal([]byte(t), &x); err != nil {
				return nil, fmt.Errorf("line %d: %v", line, err)
			}
			rows = append(rows, x)
			continue
		}
		f := strings.Split(t, ",")
		if len(f) != 7 {
			return nil, fmt.Errorf("line %d: want 7 comma-separated fields, have %d", line, len(f))
		}
		var errs [5]error
		x.Impl, x.Op = f[0], f[1]
		x.Ranks, errs[0] = strconv.Atoi(f[2])
		x.Bytes, errs[1] = strconv.ParseInt(f[3], 10, 64)
		x.Usec, errs[2] = strconv.ParseFloat(f[4], 64)
		x.AlgBW, errs[3] = strconv.ParseFloat(f[5], 64)
		x.BusBW, errs[4] = strconv.ParseFloat(f[6], 64)
		if err := errors.Join(errs[:]...); err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		rows = append(rows, x)
	}
	return rows, sc.Err()
}

// replot draws -plot from saved rows, keeping the ops of -op and, when -n
// was given, that rank count.
func replot(pc *perfConfig) error {
	var rows []row
	for _, name := range pc.replot {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		rs, err := readRows(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for _, r := range rs {
			if slices.Contains(pc.ops, r.Op) && (!pc.nSet || r.Ranks == pc.n) {
				rows = append(rows, r)
			}
		}
	}
	if len(rows) == 0 {
		return errors.New("-replot: no rows of the selected ops and ranks")
	}
	return writePlotFile(pc.plot, plotTitle(rows), rows)
}
