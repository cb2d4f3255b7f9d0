package hcomm

import (
	"time"

	"github.com/hcomm-go/hcomm/internal/boot"
)

// A NetPath describes one network path between this rank and a peer
// reached over TCP (see README, "Several network paths"). Its counters
// grow for the life of the communicator.
type NetPath struct {
	Peer int // the peer's rank in the communicator
	// Path is the index of the path's listener address among those the
	// higher rank of the pair published (HCOMM_SOCKET_ADDR order).
	Path          int
	Local, Remote string // the path's socket addresses
	// Up is false for a path dropped because it could not connect.
	Up bool
	// Retired is true for a path that stopped carrying data while in use
	// (HCOMM_PATH_STALL): its stripes went again on the pair's first path
	// and it carries nothing more.
	Retired bool
	// Rate is the estimated throughput in bytes/s (the link speed at
	// first, measured sends afterwards); Share is the fraction of the
	// last striped message this rank sent on the path.
	Rate, Share    float64
	Sent, Received uint64 // payload bytes
	// RTT and Retrans are the kernel's smoothed round-trip time (the
	// largest of the path's sockets) and retransmitted segments (summed
	// over them); zero where the system does not report them.
	RTT     time.Duration
	Retrans uint32
}

// NetPaths returns the state of every network path to every peer this
// rank has connected to over TCP, by peer and path; none when no peer is
// reached over TCP (one host, shared memory). It may be called at any
// time, from any goroutine, also while collectives run (for example by a
// metrics exporter at scrape time): it does not wait for them.
func (c *Comm) NetPaths() []NetPath {
	ps := boot.NetPaths(c.path.T, c.size)
	if len(ps) == 0 {
		return nil
	}
	out := make([]NetPath, len(ps))
	for i, p := range ps {
		out[i] = NetPath{Peer: p.Peer, Path: p.Path, Local: p.Local, Remote: p.Remote, Up: p.Up, Retired: p.Retired,
			Rate: p.Rate, Share: p.Share, Sent: p.Sent, Received: p.Received, RTT: p.RTT, Retrans: p.Retrans}
	}
	return out
}
