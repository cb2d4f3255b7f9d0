//go:build !unix

package tcp

import "net"

// discardQueued does nothing where the descriptor cannot be read without
// waiting.
func discardQueued(net.Conn) {}
