//go:build !linux

package tcp

import "net"

func queuedBytes(net.Conn) (int, bool) { return 0, false }

func peekBytes(net.Conn, []byte) int { return 0 }
