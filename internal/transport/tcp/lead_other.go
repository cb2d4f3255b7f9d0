//go:build !linux

package tcp

import "net"

func queuedBytes(net.Conn) (int, bool) { return 0, false }

// sockPeek peeks at a socket's received bytes on Linux only (lead_linux.go).
type sockPeek struct{}

func (*sockPeek) init(net.Conn) {}

func (*sockPeek) bytes() []byte { return nil }
