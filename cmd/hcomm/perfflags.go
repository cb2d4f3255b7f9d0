package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hcomm-go/hcomm"
	"github.com/hcomm-go/hcomm/internal/settings"
)

// The flags of `hcomm perf` and what they mean for a sweep.

// perfConfig is what one perf invocation measures and how it reports.
type perfConfig struct {
	n        int
	nSet     bool // -n was given (a filter for -replot)
	opSet    bool // -op was given (a filter for -replot)
	local    bool
	trans    string
	ops      []string
	minB     int64
	maxB     int64
	factor   int64
	iters    int
	warmup   int
	target   time.Duration
	lap      time.Duration // calls shorter than this are timed in laps of about this long (lapCalls)
	maxOp    time.Duration
	algos    []string // one sweep per entry; "" means the cost model
	chunk    int
	modes    []bool // in-place settings to run, in order
	dtype    hcomm.DType
	redop    hcomm.Op
	format   string // "text", "csv" or "json"
	header   bool
	label    string
	plot     string
	plotLogY bool
	settle   time.Duration // barriers before the first point (settleFor; tests may skip them)
	replot   []string
	verbose  progressMode
	// registered: buffers in registered memory (Comm.Alloc)
	registered bool
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

// optionalValueFlags are perf's flags whose value may be left out, meaning
// true, with the word besides true and false that each also accepts.
var optionalValueFlags = map[string]string{"inplace": "both", "progress": "auto"}

// optionalValueArgs lets -inplace and -progress stand alone (meaning true)
// and take their value as the next argument too ("-progress auto",
// "-inplace both", "-progress true"): a bare flag followed by one of its
// values is joined with it, and one followed by anything else becomes
// -flag=true.
func optionalValueArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		extra, ok := optionalValueFlags[strings.TrimLeft(a, "-")]
		if !ok || !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "---") {
			out = append(out, a)
			continue
		}
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		if _, err := strconv.ParseBool(next); err == nil || next == extra {
			out = append(out, a+"="+next)
			i++
			continue
		}
		out = append(out, a+"=true")
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
	d, err := settings.ParseDuration(s)
	if err != nil {
		return errors.New("want seconds (0.2) or a duration (200ms), not negative")
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
	pc := &perfConfig{target: 200 * time.Millisecond, lap: lapMin, maxOp: 3 * time.Second, modes: []bool{false}, settle: settleFor}
	var ops, minB, maxB, dtype, redop, replot string
	var csv, jsonOut, noHeader bool
	fs.IntVar(&pc.n, "n", 2, "number of ranks (processes started through hcomm run, or goroutines with -local)")
	fs.BoolVar(&pc.local, "local", false, "run the ranks as goroutines of this process instead of separate processes")
	fs.StringVar(&pc.trans, "transport", "", "force the transport between processes: shm or tcp (HCOMM_TRANSPORT)")
	fs.StringVar(&ops, "op", "allreduce", "collective(s), comma-separated, or all: "+strings.Join(perfOps, ",")+"; also (not in all): "+strings.Join(extraOps(), ","))
	fs.StringVar(&minB, "b", "8", "smallest size (bytes; K/M/G suffixes)")
	fs.StringVar(&maxB, "e", "64M", "largest size")
	fs.Int64Var(&pc.factor, "f", 4, "size multiplication factor between rows")
	fs.IntVar(&pc.iters, "iters", 0, "timed iterations per size (0: as many as fit in -T, 3 to 20000)")
	fs.IntVar(&pc.warmup, "warmup", 0, "warm-up iterations per size (0: 20 up to 64 KiB, 4 up to 8 MiB, else 1)")
	fs.Var(secondsFlag{&pc.target}, "T", "target duration of the timed loop per size: seconds (0.2) or a duration (200ms)")
	fs.Var(secondsFlag{&pc.lap}, "lap", "the median's lap: calls shorter than this are timed together in laps about this long, as reading the clock costs about a small call (0: every call alone)")
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
	fs.StringVar(&pc.plot, "plot", "", "also draw busbw and time per call against size into this SVG file")
	fs.BoolVar(&pc.plotLogY, "plot-logy", false, "draw -plot's bandwidth on a logarithmic axis (the time axis always is)")
	fs.StringVar(&replot, "replot", "", "draw -plot from these saved -csv/-json files (comma-separated) instead of measuring: rows of every collective, or of -op, and of -n if given")
	fs.BoolVar(&pc.registered, "registered", false, "allocate the buffers with Comm.Alloc (registered memory: zero-copy collectives within a host)")
	fs.Var(&pc.verbose, "progress", "progress line on stderr: true, false or auto (when stderr is a terminal)")
	if err := fs.Parse(optionalValueArgs(args)); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "n":
			pc.nSet = true
		case "op":
			pc.opSet = true
		}
	})
	if pc.n < 1 {
		return nil, fmt.Errorf("-n %d: need at least one rank", pc.n)
	}
	var err error
	if pc.minB, err = settings.ParseSize(minB); err != nil {
		return nil, fmt.Errorf("-b: %w", err)
	}
	if pc.maxB, err = settings.ParseSize(maxB); err != nil {
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
	if ops == "all" || replot != "" && !pc.opSet {
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

// extraOps lists the operations -op takes beyond the collectives of "all",
// sorted.
func extraOps() []string {
	var extra []string
	for name := range benchOps {
		if !slices.Contains(perfOps, name) {
			extra = append(extra, name)
		}
	}
	slices.Sort(extra)
	return extra
}
