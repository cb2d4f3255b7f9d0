package boot

import (
	"crypto/sha256"
	"log/slog"
	"net"
	"net/url"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/settings"
	"github.com/hcomm-go/hcomm/store"
)

var invalid = errs.Invalid

// ReadJob decides, from the program's Config (c, and its Rendezvous
// store), the settings in effect (v) and the communicators' chunk size
// and logger, how this process joins its job.
func ReadJob(c settings.Config, rendezvous store.Store, v settings.Values, chunk int, log *slog.Logger) (JobConfig, error) {
	var j JobConfig
	var err error
	if c.Size > 0 {
		j.Rank, j.Size = c.Rank, c.Size
		if j.Rank < 0 || j.Rank >= j.Size {
			return j, invalid("Config.Rank %d outside [0, %d)", j.Rank, j.Size)
		}
	} else if j.Rank, j.Size, err = rankSize(v); err != nil {
		return j, err
	} else {
		j.Launcher = v.Launcher
	}
	j.LocalRank = v.LocalRank
	j.StoreURL, j.Token, j.Store = c.Store, c.Token, rendezvous
	if j.StoreURL == "" {
		j.StoreURL = v.Store
	}
	if j.Token == "" {
		j.Token = v.Token
	}
	if j.StoreURL == "" && j.Store == nil && v.MasterAddr != "" {
		j.StoreURL = "tcp://" + net.JoinHostPort(v.MasterAddr, v.MasterPort)
		j.HostStore = net.JoinHostPort("", v.MasterPort)
		if isLoopback(v.MasterAddr) {
			// Ranks that meet on loopback are all on this host: serve
			// the store there only.
			j.HostStore = net.JoinHostPort(v.MasterAddr, v.MasterPort)
		}
	}
	if j.Size > 1 && j.StoreURL == "" && j.Store == nil {
		return j, invalid("rank %d of %d has no rendezvous store: set HCOMM_STORE (tcp://host:port or file:///dir) or MASTER_ADDR/MASTER_PORT, or start the job with `hcomm run`", j.Rank, j.Size)
	}
	j.Connect = v.ConnectTimeout
	o := &j.Options
	o.Transport, o.NSocks, o.ChunkBytes = v.Transport, v.NSocks, chunk
	o.Yield, o.TCPPoll, o.Checksum, o.Logger = v.Yield, v.TCPPoll, v.Checksum, log
	o.KeepProcs = v.ProcsSet
	o.PathWeights, o.TCPDead, o.PathStall = v.PathWeights, v.TCPDead, v.PathStall
	o.PathPing = v.PathPing
	// Single-copy shared memory (process_vm_readv) is off by default: on
	// the machines measured so far the two-copy ring, with both cores
	// copying, moves large messages about twice as fast.
	if v.ShmCMA > 0 {
		o.CMAThreshold = max(v.ShmCMA, 128<<10+1)
	}
	o.Host = HostID(v.Hostname)
	storeHost := ""
	if u, err := url.Parse(j.StoreURL); err == nil && u.Scheme != "file" {
		storeHost = u.Hostname()
	}
	if o.ListenHost, o.AdvertiseHost, err = ListenAddress(storeHost, v.SocketAddr, v.SocketIfname); err != nil {
		return j, err
	}
	if j.Token == "" && j.Size > 1 {
		// A job without a secret is open to whoever reaches its store or
		// data ports: fine on loopback, refused elsewhere unless asked for.
		exposed := !isLoopback(o.ListenHost) || (storeHost != "" && !isLoopback(storeHost))
		if exposed && !v.Insecure {
			return j, invalid("rank %d of %d has no secret token, and its store or data ports (%s) are reachable from other hosts: "+
				"set HCOMM_TOKEN to the same random secret on every rank (e.g. HCOMM_TOKEN=$(openssl rand -hex 32)), "+
				"or start the job with `hcomm run`, or serve the store with `hcomm store --env-file FILE`, which make one; "+
				"HCOMM_INSECURE=1 joins without one", j.Rank, j.Size, o.ListenHost)
		}
		if exposed {
			log.Warn("hcomm: joining without a secret token (HCOMM_INSECURE): anyone who can reach the store or this rank's data port can join the job or read its data",
				"rank", j.Rank, "listen", o.ListenHost)
		}
		// Loopback only, or insecure by request: tie the job to what the
		// launchers provide.
		j.Token = v.JobID + "/" + j.StoreURL
	}
	o.Token = sha256.Sum256([]byte(j.Token))
	return j, nil
}

// isLoopback reports whether host (a name or an address) is this
// machine's loopback.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// rankSize is the rank and size the launchers' variables set.
func rankSize(v settings.Values) (rank, size int, err error) {
	if v.RankErr != nil {
		return 0, 0, invalid("%v", v.RankErr)
	}
	return v.Rank, v.Size, nil
}
