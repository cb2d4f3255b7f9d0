package hcomm

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
)

// WriteState writes the communicator's flight recorder — its last
// operations, with sequence numbers, calls, states and timings — to w.
func (c *Comm) WriteState(w io.Writer) error {
	_, err := fmt.Fprintf(w, "hcomm: communicator %s rank %d of %d, state %s\n%s",
		c.id, c.rank, c.size, c.stateName(), c.rec.Format())
	return err
}

func (c *Comm) stateName() string {
	switch c.state.Load() {
	case stateOK:
		return "ok"
	case stateClosed:
		return "closed"
	}
	return "failed"
}

// The on-demand dump: with HCOMM_DUMP_SIGNAL=USR1 (or USR2), that signal
// makes the process write every live communicator's state to standard
// error, like a goroutine dump on SIGQUIT but without stopping the program.

var dumps struct {
	mu    sync.Mutex
	comms map[*Comm]struct{}
	sig   chan os.Signal
	done  chan struct{}
	out   io.Writer // standard error; tests replace it
}

// registerDump adds c to the communicators the dump signal reports.
func registerDump(c *Comm) {
	sig := dumpSignal(c.set.dumpSignal)
	if sig == nil {
		return
	}
	dumps.mu.Lock()
	defer dumps.mu.Unlock()
	if dumps.comms == nil {
		dumps.comms = map[*Comm]struct{}{}
	}
	dumps.comms[c] = struct{}{}
	if dumps.sig != nil {
		return
	}
	if dumps.out == nil {
		dumps.out = os.Stderr
	}
	dumps.sig, dumps.done = make(chan os.Signal, 1), make(chan struct{})
	signal.Notify(dumps.sig, sig)
	go func(sig chan os.Signal, done chan struct{}, out io.Writer) {
		defer close(done)
		for range sig {
			dumps.mu.Lock()
			for c := range dumps.comms {
				c.WriteState(out)
			}
			dumps.mu.Unlock()
		}
	}(dumps.sig, dumps.done, dumps.out)
}

// unregisterDump removes c; the last one out stops the signal handler.
func unregisterDump(c *Comm) {
	dumps.mu.Lock()
	delete(dumps.comms, c)
	var sig chan os.Signal
	var done chan struct{}
	if len(dumps.comms) == 0 && dumps.sig != nil {
		signal.Stop(dumps.sig)
		close(dumps.sig)
		sig, done = dumps.sig, dumps.done
		dumps.sig, dumps.done = nil, nil
	}
	dumps.mu.Unlock()
	if sig != nil {
		<-done
	}
}
