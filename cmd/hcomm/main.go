// Command hcomm is hcomm's tool: it launches jobs (run), serves rendezvous
// stores for other launchers (store), measures collectives (perf), prints
// topologies (topo) and says which build it is (version).
//
//	go install github.com/hcomm-go/hcomm/cmd/hcomm@latest
//	hcomm run -n 4 -- ./prog
//	hcomm perf -n 4 -op allreduce -b 8 -e 64M
package main

import (
	"errors"
	"fmt"
	"os"
)

const usage = `usage: hcomm <command> [flags]

commands:
  perf    measure collectives, nccl-tests style (hcomm perf -h)
  run     launch a job's ranks, like mpirun or torchrun (hcomm run -h)
  store   serve a rendezvous store for jobs started by other launchers (hcomm store -h)
  topo    print the topology a job sees (hcomm topo -h)
  sim     predict collectives' times on a modelled cluster (hcomm sim -h)
  plan    explain the planner's choice per size (hcomm plan -h)
  trace   merge and check trace-event files (hcomm trace -h)
  version print hcomm's version, the Go release that built it and its commit
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "perf":
		err = perf(os.Args[2:], os.Stdout, os.Stderr)
	case "run":
		os.Exit(runCmd(os.Args[2:], os.Stdout, os.Stderr))
	case "store":
		err = storeCmd(os.Args[2:], os.Stdout, os.Stderr)
	case "topo":
		err = topoCmd(os.Args[2:], os.Stdout, os.Stderr)
	case "version", "-version", "--version":
		err = versionCmd(os.Args[2:], os.Stdout)
	case "sim":
		err = simCmd(os.Args[2:], os.Stdout, os.Stderr)
	case "plan":
		err = planCmd(os.Args[2:], os.Stdout, os.Stderr)
	case "trace":
		err = traceCmd(os.Args[2:], os.Stdout, os.Stderr)
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "hcomm: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hcomm:", err)
		code := 1
		var ee exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		os.Exit(code)
	}
}

// exitError is an error that ends the command with the given exit status.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }
