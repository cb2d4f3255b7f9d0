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
	put(v, c.Timeout != 0, &v.Timeout, max(c.Timeout, 0), "HCOMM_TIMEOUT") // negative: none
	put(v, c.ConnectTimeout > 0, &v.ConnectTimeout, c.ConnectTimeout, "HCOMM_CONNECT_TIMEOUT")
	put(v, c.Algo != "", &v.Algo, c.Algo, "HCOMM_ALGO")
	put(v, c.ChunkBytes != 0, &v.ChunkBytes, c.ChunkBytes, "HCOMM_BUFFSIZE")
	if err := parsed(v, c.Transport, &v.Transport, ParseTransport, "Transport", "HCOMM_TRANSPORT"); err != nil {
		return err
	}
	if c.NSocks != 0 && (c.NSocks < 1 || c.NSocks > 16) {
		return fmt.Errorf("Config.NSocks = %d: want 1..16", c.NSocks)
	}
	put(v, c.NSocks != 0, &v.NSocks, c.NSocks, "HCOMM_NSOCKS")
	put(v, c.SocketAddr != "", &v.SocketAddr, c.SocketAddr, "HCOMM_SOCKET_ADDR")
	put(v, c.SocketIfname != "", &v.SocketIfname, c.SocketIfname, "HCOMM_SOCKET_IFNAME")
	put(v, c.Hostname != "", &v.Hostname, c.Hostname, "HCOMM_HOSTNAME")
	put(v, c.CPUAffinity != "", &v.CPUAffinity, c.CPUAffinity, "HCOMM_CPU_AFFINITY")
	put(v, c.ShmCMA != 0, &v.ShmCMA, max(c.ShmCMA, 0), "HCOMM_SHM_CMA")
	put(v, c.ZeroCopy != 0, &v.ZeroCopy, max(c.ZeroCopy, 0), "HCOMM_ZERO_COPY")
	if c.ZeroCopy != 0 {
		v.ZeroCopyFixed = c.ZeroCopy > 0
	}
	put(v, c.CopyEngine != 0, &v.CopyEngine, max(c.CopyEngine, -1), "HCOMM_COPY_ENGINE")
	if err := parsed(v, c.Yield, &v.Yield, ParseYield, "Yield", "HCOMM_YIELD"); err != nil {
		return err
	}
	put(v, c.TCPPoll != 0, &v.TCPPoll, c.TCPPoll, "HCOMM_TCP_POLL")
	put(v, c.Insecure, &v.Insecure, true, "HCOMM_INSECURE")
	put(v, c.Checksum, &v.Checksum, true, "HCOMM_CHECKSUM")
	put(v, c.CheckResults, &v.CheckResults, true, "HCOMM_CHECK_RESULTS")
	if err := parsed(v, c.DumpSignal, &v.DumpSignal, ParseSignal, "DumpSignal", "HCOMM_DUMP_SIGNAL"); err != nil {
		return err
	}
	if c.Logger != nil {
		v.Set("HCOMM_DEBUG") // the logger itself is LoggerFor's
	}
	return nil
}

// put lays a value the program's Config set (set) over *dst, a field of
// v, and records the variable it overrides (name) as set by the program.
func put[T any](v *Values, set bool, dst *T, val T, name string) {
	if set {
		*dst = val
		v.Set(name)
	}
}

// parsed is put for a string field of the program's Config (field) that
// parse reads, "" for not set; a value parse refuses is an error naming
// the field.
func parsed[T any](v *Values, val string, dst *T, parse func(string) (T, error), field, name string) error {
	if val == "" {
		return nil
	}
	x, err := parse(val)
	if err != nil {
		return fmt.Errorf("Config.%s: %v", field, err)
	}
	put(v, true, dst, x, name)
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
