package hcomm

import (
	"fmt"

	"github.com/hcomm-go/hcomm/internal/leak"
)

// open holds the communicators not closed, for Unclosed. A communicator
// that is never closed keeps its goroutines (transport readers, watchers)
// and, in a job, its connections for the life of the process.
var open leak.Set

// track records c as open, made by the caller outside this package.
func track(c *Comm) {
	open.Add(c, fmt.Sprintf("communicator %s rank %d of %d, made at %s", c.id, c.rank, c.size, leak.Caller("github.com/hcomm-go/hcomm")))
}

// Unclosed describes every communicator of this process that has not been
// closed — its identity, rank, size and the line that made it (Init,
// NewLocal or Split) — sorted. It is a leak check: a program or a test's
// TestMain can call it where every communicator should be closed, as
//
//	if u := hcomm.Unclosed(); len(u) > 0 {
//		log.Fatalf("communicators never closed:\n%s", strings.Join(u, "\n"))
//	}
//
// A communicator not closed keeps its goroutines and connections for the
// life of the process; Close releases them.
func Unclosed() []string { return open.List() }
