//go:build !unix

package tcp

import "net"

// drainPings does nothing where the socket cannot be read without waiting:
// pings wait to be skipped by the next read of the connection.
func drainPings(net.Conn) int { return 0 }
