package settings

import (
	"fmt"
	"log/slog"
	"reflect"
	"time"
)

// Config is what the program's Config says, field for field under the
// root Config's names and types (FromConfig copies them): a zero field
// means "not set", and Overlay lays the others over the environment's
// values. Rendezvous and Observer, which are not settings, stay in the
// root.
type Config struct {
	Rank, Size                   int
	Store, Token                 string
	Timeout, ConnectTimeout      time.Duration
	Algo                         string
	ChunkBytes                   int
	Transport                    string
	NSocks                       int
	SocketAddr, SocketIfname     string
	Hostname                     string
	ShmCMA, ZeroCopy, CopyEngine int
	Yield                        string
	TCPPoll                      time.Duration
	Checksum, Insecure           bool
	CheckResults                 bool
	Logger                       *slog.Logger
	DumpSignal, CPUAffinity      string
}

// FromConfig copies the fields of the root's Config (cfg, a struct or a
// pointer to one, nil for none) that Config declares. A field Config
// declares and cfg lacks, or has with another type, is a programming
// error: it panics, so that the first Init or NewLocal of any test finds
// a renamed field.
func FromConfig(cfg any) Config {
	var c Config
	src := reflect.ValueOf(cfg)
	if src.Kind() == reflect.Pointer {
		if src.IsNil() {
			return c
		}
		src = src.Elem()
	}
	dst := reflect.ValueOf(&c).Elem()
	for i := range dst.NumField() {
		name := dst.Type().Field(i).Name
		f := src.FieldByName(name)
		if !f.IsValid() || f.Type() != dst.Field(i).Type() {
			panic("settings: the root Config has no field " + name + " of type " + dst.Field(i).Type().String())
		}
		dst.Field(i).Set(f)
	}
	return c
}

// Overlay lays the program's settings (c) over v, read from the
// environment, and records which variables they set (Source). Rank, Size,
// Store and Token are the job's, read by boot.ReadJob. An invalid field is
// an error naming it.
func (v *Values) Overlay(c Config) error {
	str := func(dst *string, val, name string) {
		if val != "" {
			*dst = val
			v.Set(name)
		}
	}
	switch {
	case c.Timeout > 0:
		v.Timeout = c.Timeout
		v.Set("HCOMM_TIMEOUT")
	case c.Timeout < 0:
		v.Timeout = 0
		v.Set("HCOMM_TIMEOUT")
	}
	if c.ConnectTimeout > 0 {
		v.ConnectTimeout = c.ConnectTimeout
		v.Set("HCOMM_CONNECT_TIMEOUT")
	}
	str(&v.Algo, c.Algo, "HCOMM_ALGO")
	if c.ChunkBytes != 0 {
		v.ChunkBytes = c.ChunkBytes
		v.Set("HCOMM_BUFFSIZE")
	}
	if c.Transport != "" {
		t, err := ParseTransport(c.Transport)
		if err != nil {
			return fmt.Errorf("Config.Transport: %v", err)
		}
		v.Transport = t
		v.Set("HCOMM_TRANSPORT")
	}
	if c.NSocks != 0 {
		if c.NSocks < 1 || c.NSocks > 16 {
			return fmt.Errorf("Config.NSocks = %d: want 1..16", c.NSocks)
		}
		v.NSocks = c.NSocks
		v.Set("HCOMM_NSOCKS")
	}
	str(&v.SocketAddr, c.SocketAddr, "HCOMM_SOCKET_ADDR")
	str(&v.SocketIfname, c.SocketIfname, "HCOMM_SOCKET_IFNAME")
	str(&v.Hostname, c.Hostname, "HCOMM_HOSTNAME")
	str(&v.CPUAffinity, c.CPUAffinity, "HCOMM_CPU_AFFINITY")
	if c.ShmCMA != 0 {
		v.ShmCMA = max(c.ShmCMA, 0)
		v.Set("HCOMM_SHM_CMA")
	}
	if c.ZeroCopy != 0 {
		v.ZeroCopy = max(c.ZeroCopy, 0)
		v.Set("HCOMM_ZERO_COPY")
	}
	if c.CopyEngine != 0 {
		v.CopyEngine = max(c.CopyEngine, -1)
		v.Set("HCOMM_COPY_ENGINE")
	}
	if c.Yield != "" {
		y, err := ParseYield(c.Yield)
		if err != nil {
			return fmt.Errorf("Config.Yield: %v", err)
		}
		v.Yield = y
		v.Set("HCOMM_YIELD")
	}
	if c.TCPPoll != 0 {
		v.TCPPoll = c.TCPPoll
		v.Set("HCOMM_TCP_POLL")
	}
	if c.Insecure {
		v.Insecure = true
		v.Set("HCOMM_INSECURE")
	}
	if c.Checksum {
		v.Checksum = true
		v.Set("HCOMM_CHECKSUM")
	}
	if c.CheckResults {
		v.CheckResults = true
		v.Set("HCOMM_CHECK_RESULTS")
	}
	if c.DumpSignal != "" {
		s, err := ParseSignal(c.DumpSignal)
		if err != nil {
			return fmt.Errorf("Config.DumpSignal: %v", err)
		}
		v.DumpSignal = s
		v.Set("HCOMM_DUMP_SIGNAL")
	}
	if c.Logger != nil {
		v.Set("HCOMM_DEBUG")
	}
	return nil
}

// LoggerFor returns the program's logger, else one on standard error at
// the level of v.Debug.
func (v *Values) LoggerFor(c Config) *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return v.Logger()
}
