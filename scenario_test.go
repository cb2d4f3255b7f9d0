package hcomm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Fault and ordering scenarios, driven by the files in
// testdata/scenarios: each runs a job of real processes under hcomm run
// (faultJob) over each transport it names, every rank interpreting the
// same script, and holds every rank's outcome to the file's expectations.
//
// A file is a list of lines (# starts a comment):
//
//	ranks N                the job's size
//	transports shm tcp     run once per transport (-short: the first only)
//	env KEY=VALUE          for every rank (HCOMM_TEST_TIMEOUT=2s bounds calls;
//	                       HCOMM_TEST_HOLD_REPORTS=N holds a rank that logs a
//	                       culprit report until N ranks have, see holdReports)
//	run SEL: STEP          a step of the ranks SEL selects, in file order
//	expect SEL: KINDS [peer=N] [op=NAME] [type=TYPE] ["TEXT"]
//
// SEL is "all", a rank list "0,2", or "!2" (all but 2). A step is one call:
//
//	allreduce COUNT | allreduce-max COUNT | bcast COUNT ROOT | reduce COUNT ROOT |
//	barrier | send PEER TAG COUNT | recv PEER TAG COUNT | stream-wait
//
// (COUNT float32 elements; stream-wait makes a stream of the communicator
// wait for an event nobody records and synchronizes it), optionally
// preceded by what happens once the call is under way (blocked on its
// peers, as the flight recorder shows it): die-during (SIGKILL),
// abort-during (Comm.Abort with cause "operator gave up") or close-during
// (Comm.Close). A rank stops at its first error. KINDS is what the first
// error must match, alternatives joined by "|": mismatch, timeout,
// peerlost, aborted, closed, invalid (the sentinels), or ok (no error);
// killed for a rank that dies. peer is OpError.Peer, the culprit; op the
// OpError's or StreamError's Op; type the error's type (OpError or
// StreamError); TEXT must appear in the error's message.

// scenarioKinds are the sentinels a scenario's errors are classified by.
var scenarioKinds = []struct {
	e    error
	name string
}{{ErrMismatch, "mismatch"}, {ErrTimeout, "timeout"}, {ErrPeerLost, "peerlost"}, {ErrAborted, "aborted"},
	{ErrClosed, "closed"}, {ErrInvalidArgument, "invalid"}}

// scenario is one parsed file.
type scenario struct {
	name       string
	ranks      int
	transports []string
	env        []string
	run        []string // the run lines, for the ranks
	expect     []expectation
}

type expectation struct {
	line  string
	sel   string
	kinds []string
	peer  *int
	op    string
	typ   string
	text  string
}

// selects reports whether SEL names rank r of n.
func selects(sel string, r int) bool {
	sel = strings.TrimSpace(sel)
	if sel == "all" {
		return true
	}
	not := strings.HasPrefix(sel, "!")
	in := false
	for _, f := range strings.Split(strings.TrimPrefix(sel, "!"), ",") {
		if v, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && v == r {
			in = true
		}
	}
	return in != not
}

func parseScenario(name, text string) (*scenario, error) {
	s := &scenario{name: name}
	for i, line := range strings.Split(text, "\n") {
		if j := strings.Index(line, "#"); j >= 0 && !strings.Contains(line[:j], `"`) {
			line = line[:j]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		word, rest, _ := strings.Cut(line, " ")
		bad := func(why string) error { return fmt.Errorf("%s:%d: %s: %q", name, i+1, why, line) }
		switch word {
		case "ranks":
			n, err := strconv.Atoi(rest)
			if err != nil || n < 1 {
				return nil, bad("bad rank count")
			}
			s.ranks = n
		case "transports":
			s.transports = strings.Fields(rest)
		case "env":
			s.env = append(s.env, rest)
		case "run":
			if !strings.Contains(rest, ":") {
				return nil, bad("want run SEL: STEP")
			}
			s.run = append(s.run, rest)
		case "expect":
			sel, what, ok := strings.Cut(rest, ":")
			if !ok {
				return nil, bad("want expect SEL: KINDS ...")
			}
			e := expectation{line: line, sel: sel}
			if q := strings.Index(what, `"`); q >= 0 {
				t, err := strconv.Unquote(strings.TrimSpace(what[q:]))
				if err != nil {
					return nil, bad("bad quoted text")
				}
				e.text, what = t, what[:q]
			}
			fs := strings.Fields(what)
			if len(fs) == 0 {
				return nil, bad("no kinds")
			}
			e.kinds = strings.Split(fs[0], "|")
			for _, f := range fs[1:] {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "peer":
					p, err := strconv.Atoi(v)
					if err != nil {
						return nil, bad("bad peer")
					}
					e.peer = &p
				case "op":
					e.op = v
				case "type":
					e.typ = v
				default:
					return nil, bad("unknown field " + k)
				}
			}
			s.expect = append(s.expect, e)
		default:
			return nil, bad("unknown line")
		}
	}
	if s.ranks == 0 || len(s.transports) == 0 || len(s.run) == 0 || len(s.expect) == 0 {
		return nil, fmt.Errorf("%s: needs ranks, transports, run and expect lines", name)
	}
	for r := range s.ranks {
		n := 0
		for _, e := range s.expect {
			if selects(e.sel, r) {
				n++
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("%s: rank %d has %d expectations, want 1", name, r, n)
		}
	}
	return s, nil
}

// outcome is one rank's report of how its script ended.
type outcome struct {
	kinds string // the sentinels the error matches, joined by "+"; "ok"
	peer  int
	op    string
	typ   string
	err   string
}

func (o outcome) has(kind string) bool {
	for _, k := range strings.Split(o.kinds, "+") {
		if k == kind {
			return true
		}
	}
	return false
}

// check returns what is wrong with o against e, or "".
func (e *expectation) check(o *outcome) string {
	var wrong []string
	match := false
	for _, k := range e.kinds {
		if o.has(k) {
			match = true
		}
	}
	if !match {
		wrong = append(wrong, "matches "+o.kinds)
	}
	if e.peer != nil && o.peer != *e.peer {
		wrong = append(wrong, fmt.Sprintf("peer %d", o.peer))
	}
	if e.op != "" && o.op != e.op {
		wrong = append(wrong, "op "+o.op)
	}
	if e.typ != "" && o.typ != e.typ {
		wrong = append(wrong, "type "+o.typ)
	}
	if e.text != "" && !strings.Contains(o.err, e.text) {
		wrong = append(wrong, fmt.Sprintf("no %q in the error", e.text))
	}
	return strings.Join(wrong, ", ")
}

func TestScenarios(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := parseScenario(filepath.Base(f), string(b))
		if err != nil {
			t.Fatal(err)
		}
		transports := s.transports
		if testing.Short() {
			transports = transports[:1]
		}
		for _, tr := range transports {
			t.Run(strings.TrimSuffix(s.name, ".txt")+"/"+tr, func(t *testing.T) {
				env := append([]string{"HCOMM_TRANSPORT=" + tr, "HCOMM_TEST_SCRIPT=" + strings.Join(s.run, "\n")}, s.env...)
				out, _, _ := faultJob(t, s.ranks, "script", env...)
				got := scenarioLines(out)
				if testing.Verbose() && os.Getenv("HCOMM_TEST_SCENARIO_LOG") != "" {
					t.Log(out)
				}
				for r := range s.ranks {
					for _, e := range s.expect {
						if !selects(e.sel, r) {
							continue
						}
						o, ok := got[r]
						if e.kinds[0] == "killed" {
							if ok {
								t.Errorf("rank %d reported %+v; it was to die", r, o)
							}
							continue
						}
						if !ok {
							t.Errorf("rank %d did not report (%s):\n%s", r, e.line, lastLines(out, 30))
							continue
						}
						if w := e.check(&o); w != "" {
							t.Errorf("rank %d: %s; want %s\nerror: %s", r, w, e.line, o.err)
						}
					}
				}
			})
		}
	}
}

// scenarioLines parses the SCENARIO lines of a job's output by rank.
func scenarioLines(out string) map[int]outcome {
	got := map[int]outcome{}
	for r, f := range taggedLines(out, "SCENARIO ", 6) {
		peer, _ := strconv.Atoi(f["peer"])
		msg, _ := strconv.Unquote(f["err"])
		got[r] = outcome{kinds: f["kinds"], peer: peer, op: f["op"], typ: f["type"], err: msg}
	}
	return got
}

// rankScript is a rank of TestScenarios: it runs its steps of
// HCOMM_TEST_SCRIPT and reports how they ended.
func rankScript(t *testing.T, c *Comm) {
	colls := uint64(0)
	var err error
	for _, line := range strings.Split(os.Getenv("HCOMM_TEST_SCRIPT"), "\n") {
		sel, step, _ := strings.Cut(line, ":")
		if !selects(sel, c.Rank()) {
			continue
		}
		if err = scriptStep(t, c, strings.Fields(step), &colls); err != nil {
			break
		}
	}
	o := outcome{kinds: "ok", peer: -1}
	if err != nil {
		var ks []string
		for _, k := range scenarioKinds {
			if errors.Is(err, k.e) {
				ks = append(ks, k.name)
			}
		}
		o.kinds = strings.Join(ks, "+")
		if o.kinds == "" {
			o.kinds = "other"
		}
		var oe *OpError
		var se *StreamError
		switch {
		case errors.As(err, &oe):
			o.peer, o.op, o.typ = oe.Peer, oe.Op, "OpError"
		case errors.As(err, &se):
			o.op, o.typ = se.Op, "StreamError"
		default:
			o.typ = fmt.Sprintf("%T", err)
		}
		o.err = err.Error()
	}
	fmt.Printf("SCENARIO rank=%d kinds=%s peer=%d op=%s type=%s err=%q\n", c.Rank(), o.kinds, o.peer, o.op, o.typ, o.err)
}

// scriptStep runs one step; colls counts the collectives run so far.
func scriptStep(t *testing.T, c *Comm, f []string, colls *uint64) error {
	ctx := context.Background()
	during := ""
	if len(f) > 0 && strings.HasSuffix(f[0], "-during") {
		during, f = f[0], f[1:]
	}
	if len(f) == 0 {
		t.Fatal("empty step")
	}
	arg := func(i int) int {
		if i >= len(f) {
			t.Fatalf("step %q: missing argument %d", f, i)
		}
		v, err := strconv.Atoi(f[i])
		if err != nil {
			t.Fatalf("step %q: %v", f, err)
		}
		return v
	}
	p2p := f[0] == "send" || f[0] == "recv"
	if during != "" && f[0] != "stream-wait" {
		seq := *colls + 1
		go func() {
			var err error
			if p2p {
				err = waitP2P(c)
			} else {
				err = waitRunning(c, seq)
			}
			if err != nil {
				panic(err)
			}
			switch during {
			case "die-during":
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			case "abort-during":
				c.Abort(errors.New("operator gave up"))
			case "close-during":
				c.Close()
			default:
				panic("unknown " + during)
			}
		}()
	}
	if !p2p && f[0] != "stream-wait" {
		*colls++
	}
	switch f[0] {
	case "allreduce", "allreduce-max":
		x := make([]float32, arg(1))
		op := Sum
		if f[0] == "allreduce-max" {
			op = Max
		}
		return AllReduce(ctx, c, x, x, op)
	case "bcast":
		return Broadcast(ctx, c, make([]float32, arg(1)), arg(2))
	case "reduce":
		x := make([]float32, arg(1))
		return Reduce(ctx, c, x, x, Sum, arg(2))
	case "barrier":
		return c.Barrier(ctx)
	case "send":
		return Send(ctx, c, make([]float32, arg(3)), arg(1), arg(2))
	case "recv":
		return Recv(ctx, c, make([]float32, arg(3)), arg(1), arg(2))
	case "stream-wait":
		s := c.NewStream("waiter")
		s.WaitEvent(NewEvent("never"))
		if during == "close-during" {
			// Once the stream's goroutine waits, its communicator's
			// Close closes it.
			deadline := time.Now().Add(20 * time.Second)
			for !s.s.Waiting() && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond) // polls a condition; acts only once it holds
			}
			c.Close()
		}
		return s.Synchronize(ctx)
	}
	t.Fatalf("unknown step %q", f)
	return nil
}

// waitP2P waits until c's flight recorder shows a Send or Recv running.
func waitP2P(c *Comm) error {
	deadline := time.Now().Add(20 * time.Second)
	for len(c.path.Rec.Snapshot().P2P) == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("rank %d never entered a Send or Recv", c.Rank())
		}
		time.Sleep(time.Millisecond) // polls a condition; acts only once it holds
	}
	return nil
}

func TestScenarioParse(t *testing.T) {
	for _, tc := range []struct {
		sel     string
		in, out []int
	}{
		{"all", []int{0, 3}, nil}, {"1,3", []int{1, 3}, []int{0, 2}}, {"!2", []int{0, 1, 3}, []int{2}},
	} {
		for _, r := range tc.in {
			if !selects(tc.sel, r) {
				t.Errorf("%q does not select rank %d", tc.sel, r)
			}
		}
		for _, r := range tc.out {
			if selects(tc.sel, r) {
				t.Errorf("%q selects rank %d", tc.sel, r)
			}
		}
	}
	for _, bad := range []string{
		"ranks 2\ntransports tcp\nrun all: barrier\n",                                            // no expectation
		"ranks 2\ntransports tcp\nrun all: barrier\nexpect 0: ok\n",                              // rank 1 unexpected
		"ranks 2\ntransports tcp\nrun all: barrier\nexpect all: ok\nexpect 1: ok\n",              // rank 1 twice
		"ranks 2\ntransports tcp\nrun all: barrier\nexpect all: ok colour=red\n",                 // unknown field
		"ranks 2\ntransports tcp\nrun all barrier\nexpect all: ok\n",                             // no selector
		"ranks two\ntransports tcp\nrun all: barrier\nexpect all: ok\n",                          // bad count
		"ranks 2\ntransports tcp\nrun all: barrier\nexpect all: ok \"unterminated\nfrobnicate\n", // unknown line
	} {
		if _, err := parseScenario("bad", bad); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
	s, err := parseScenario("good", "ranks 2 # two\ntransports tcp\nrun all: barrier\nexpect all: closed|aborted peer=1 op=Recv type=OpError \"a # b\"\n")
	if err != nil {
		t.Fatal(err)
	}
	e := s.expect[0]
	if len(e.kinds) != 2 || *e.peer != 1 || e.op != "Recv" || e.typ != "OpError" || e.text != "a # b" {
		t.Fatalf("parsed %+v", e)
	}
	o := outcome{kinds: "aborted+peerlost", peer: 1, op: "Recv", typ: "OpError", err: "x a # b"}
	if w := e.check(&o); w != "" {
		t.Fatalf("check: %s", w)
	}
	o.peer = 2
	if w := e.check(&o); w == "" {
		t.Fatal("check passed a wrong peer")
	}
}
