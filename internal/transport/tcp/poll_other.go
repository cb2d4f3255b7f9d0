//go:build !unix

package tcp

import (
	"sync/atomic"
	"time"
)

// setPoll leaves polled reads off: readPolled reads as io.ReadFull does.
func (c *conn) setPoll(time.Duration, bool, *atomic.Int32) {}
