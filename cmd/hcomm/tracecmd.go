package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/hcomm-go/hcomm/internal/traceevent"
)

const traceUsage = `usage: hcomm trace merge [-o FILE] RANKFILE...
       hcomm trace check FILE...

Trace-event files (Chrome/Perfetto JSON: open them in ui.perfetto.dev or
chrome://tracing) hold one process per rank and one thread per stream.
merge joins per-rank files into one, metadata first and events by time,
renumbering the processes of a file whose ranks another file already
claimed; check validates files against the trace-event format (phases,
required fields, ts/dur in microseconds, integer pid/tid, begin/end
nesting) and counts their events.
`

func traceCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, traceUsage)
		return errors.New("trace: missing subcommand (merge or check)")
	}
	switch args[0] {
	case "merge":
		return traceMerge(args[1:], stdout, stderr)
	case "check":
		return traceCheck(args[1:], stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, traceUsage)
		return nil
	}
	fmt.Fprint(stderr, traceUsage)
	return fmt.Errorf("trace: unknown subcommand %q", args[0])
}

func readTrace(name string) ([]traceevent.Event, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	evs, err := traceevent.Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return evs, nil
}

func traceMerge(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("trace merge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the merged file here (default: standard output)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("trace merge: no input files")
	}
	var files [][]traceevent.Event
	for _, name := range fs.Args() {
		evs, err := readTrace(name)
		if err != nil {
			return fmt.Errorf("trace merge: %w", err)
		}
		files = append(files, evs)
	}
	merged, renum := traceevent.Merge(files)
	if renum > 0 {
		fmt.Fprintf(stderr, "hcomm trace merge: %d file(s) repeated ranks of earlier files; their processes were renumbered\n", renum)
	}
	var w *traceevent.Writer
	if *out == "" {
		w = traceevent.NewWriter(nopCloser{stdout})
	} else {
		f, err := os.Create(*out)
		if err != nil {
			return fmt.Errorf("trace merge: %w", err)
		}
		w = traceevent.NewWriter(f)
	}
	for _, e := range merged {
		w.Write(e)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("trace merge: %w", err)
	}
	return nil
}

type nopCloser struct{ io.Writer }

func traceCheck(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("trace check: no files")
	}
	var bad error
	for _, name := range args {
		evs, err := readTrace(name)
		if err != nil {
			fmt.Fprintf(stdout, "%s: %v\n", name, err)
			bad = errors.Join(bad, err)
			continue
		}
		procs := map[int]bool{}
		tracks := map[[2]int]bool{}
		slices := 0
		for _, e := range evs {
			procs[e.PID] = true
			if e.Ph != "M" {
				tracks[[2]int{e.PID, e.TID}] = true
			}
			if e.Ph == "X" || e.Ph == "B" {
				slices++
			}
		}
		fmt.Fprintf(stdout, "%s: ok, %d events, %d slices, %d processes, %d tracks\n", name, len(evs), slices, len(procs), len(tracks))
	}
	if bad != nil {
		return fmt.Errorf("trace check: invalid file(s)")
	}
	return nil
}
