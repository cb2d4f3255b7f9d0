package boot

import (
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/transport/mux"
	"github.com/hcomm-go/hcomm/internal/transport/tcp"
)

// NetPaths returns the state of the network paths to the TCP peers of a
// communicator of size ranks whose transport is t (tcp.Transport.Paths):
// none unless t is a mux that routes some peer over TCP.
func NetPaths(t transport.Transport, size int) []tcp.PathStats {
	m, ok := t.(*mux.Mux)
	if !ok {
		return nil
	}
	var out []tcp.PathStats
	var seen *tcp.Transport
	for p := range size {
		if tr, ok := m.Route(p).(*tcp.Transport); ok && tr != seen {
			seen = tr // one TCP transport per communicator
			out = append(out, tr.Paths()...)
		}
	}
	return out
}
