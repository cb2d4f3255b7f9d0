package errs

import (
	"context"
	"fmt"
	"time"
)

// Timeout marks a deadline: it matches ErrTimeout and
// context.DeadlineExceeded.
type Timeout struct {
	After  time.Duration // the configured timeout, or 0 when the ctx's deadline fired
	Report string        // who everyone waits for, when the job could tell
}

func (e *Timeout) Error() string {
	s := "timed out: the caller's context deadline passed (context deadline exceeded)"
	if e.After > 0 {
		s = fmt.Sprintf("timed out after %v (raise Config.Timeout or HCOMM_TIMEOUT if peers are legitimately slow)", e.After)
	}
	if e.Report != "" {
		s += "; " + e.Report
	}
	return s
}

// Unwrap returns ErrTimeout and context.DeadlineExceeded.
func (e *Timeout) Unwrap() []error { return []error{ErrTimeout, context.DeadlineExceeded} }
