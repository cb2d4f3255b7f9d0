package diag

import (
	"io"
	"os"
	"os/signal"
	"sync"
)

// The on-demand dump: with HCOMM_DUMP_SIGNAL=USR1 (or USR2), that signal
// makes the process write every live communicator's state to standard
// error, like a goroutine dump on SIGQUIT but without stopping the program.

// StateWriter is a communicator that can write its flight recorder.
type StateWriter interface {
	WriteState(w io.Writer) error
}

var dumps struct {
	mu    sync.Mutex
	comms map[StateWriter]struct{}
	sig   chan os.Signal
	done  chan struct{}
	out   io.Writer // standard error unless SetDumpOutput says otherwise
}

// SetDumpOutput makes later dumps go to w (nil: standard error) and
// returns a function that restores the previous output. For tests.
func SetDumpOutput(w io.Writer) (restore func()) {
	dumps.mu.Lock()
	old := dumps.out
	dumps.out = w
	dumps.mu.Unlock()
	return func() {
		dumps.mu.Lock()
		dumps.out = old
		dumps.mu.Unlock()
	}
}

// RegisterDump adds c to the communicators the signal sig (nil: none)
// dumps. The first registration installs the handler.
func RegisterDump(sig os.Signal, c StateWriter) {
	if sig == nil {
		return
	}
	dumps.mu.Lock()
	defer dumps.mu.Unlock()
	if dumps.comms == nil {
		dumps.comms = map[StateWriter]struct{}{}
	}
	dumps.comms[c] = struct{}{}
	if dumps.sig != nil {
		return
	}
	dumps.sig, dumps.done = make(chan os.Signal, 1), make(chan struct{})
	signal.Notify(dumps.sig, sig)
	go func(sig chan os.Signal, done chan struct{}) {
		defer close(done)
		for range sig {
			dumps.mu.Lock()
			out := dumps.out
			if out == nil {
				out = os.Stderr
			}
			for c := range dumps.comms {
				c.WriteState(out)
			}
			dumps.mu.Unlock()
		}
	}(dumps.sig, dumps.done)
}

// UnregisterDump removes c; the last one out stops the signal handler.
func UnregisterDump(c StateWriter) {
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
