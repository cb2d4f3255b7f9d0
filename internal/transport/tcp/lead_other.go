//go:build !linux

package tcp

import "net"

// sockPeek peeks at a socket's received bytes on Linux only
// (lead_linux.go); elsewhere it drains pings as ping_unix.go can.
type sockPeek struct{ nc net.Conn }

func (p *sockPeek) init(nc net.Conn) { p.nc = nc }

func (*sockPeek) bytes() []byte { return nil }

func (*sockPeek) queued() (int, bool) { return 0, false }

func (p *sockPeek) drainPings() int { return drainPings(p.nc) }
