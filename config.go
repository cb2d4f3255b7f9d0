package hcomm

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hcomm-go/hcomm/internal/exec"
	"github.com/hcomm-go/hcomm/internal/plan"
)

// DefaultTimeout bounds every collective when neither Config.Timeout nor
// HCOMM_TIMEOUT says otherwise.
const DefaultTimeout = 10 * time.Minute

// Config configures a communicator. A nil *Config, and every zero field,
// means: take the value from the environment (the HCOMM_ variables listed
// in the README), else the default.
type Config struct {
	// Rank and Size place this process in the job (Init only). A zero Size
	// means: read both from the environment.
	Rank, Size int

	// Store is the rendezvous store's URL (Init only): tcp://host:port or
	// file:///dir. Empty means HCOMM_STORE.
	Store string

	// Token is the job's shared secret (Init only). Empty means
	// HCOMM_TOKEN.
	Token string

	// Timeout bounds each operation (collective, Send, Recv, Barrier,
	// Split) in addition to the caller's ctx; whichever ends first wins.
	// Zero means HCOMM_TIMEOUT or DefaultTimeout; negative means no limit
	// beyond the ctx.
	Timeout time.Duration

	// Algo forces algorithms per collective, in HCOMM_ALGO's syntax:
	// "allreduce=ring,broadcast=tree", or one name ("ring") for every
	// collective that has it. An algorithm that cannot serve a call is
	// skipped for that call.
	Algo string

	// ChunkBytes is the size messages are cut into for pipelining
	// (HCOMM_BUFFSIZE; default 1 MiB). It must be the same on every rank.
	ChunkBytes int

	// Logger receives diagnostics. Nil means a logger on standard error at
	// the level HCOMM_DEBUG names (default: warnings only).
	Logger *slog.Logger

	// CheckResults makes every AllReduce, AllGather and Broadcast compare
	// a hash of its result across the ranks and fail with ErrMismatch if
	// they differ (HCOMM_CHECK_RESULTS=1). It costs one small AllGather per
	// call; it is a debugging aid.
	CheckResults bool
}

// settings is a Config with everything resolved.
type settings struct {
	timeout   time.Duration // 0: none
	overrides plan.Overrides
	chunk     int
	log       *slog.Logger
	// checkResults compares results across ranks (HCOMM_CHECK_RESULTS).
	checkResults bool
}

func resolve(cfg *Config) (settings, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	var s settings
	switch {
	case c.Timeout > 0:
		s.timeout = c.Timeout
	case c.Timeout < 0:
	default:
		s.timeout = DefaultTimeout
		if v := os.Getenv("HCOMM_TIMEOUT"); v != "" {
			d, err := parseDuration(v)
			if err != nil {
				return s, invalid("HCOMM_TIMEOUT=%q: %v", v, err)
			}
			s.timeout = max(d, 0)
		}
	}
	algo := c.Algo
	if algo == "" {
		algo = os.Getenv("HCOMM_ALGO")
	}
	o, err := plan.ParseOverrides(algo)
	if err != nil {
		return s, invalid("algorithm override %q: %v", algo, err)
	}
	s.overrides = o
	s.chunk = c.ChunkBytes
	if s.chunk == 0 {
		if v := os.Getenv("HCOMM_BUFFSIZE"); v != "" {
			n, err := parseBytes(v)
			if err != nil || n <= 0 {
				return s, invalid("HCOMM_BUFFSIZE=%q: want a positive size such as 4194304 or 4M", v)
			}
			s.chunk = n
		}
	}
	if s.chunk <= 0 {
		s.chunk = exec.DefaultChunkBytes
	}
	s.checkResults = c.CheckResults || os.Getenv("HCOMM_CHECK_RESULTS") == "1"
	s.log = c.Logger
	if s.log == nil {
		s.log = defaultLogger()
	}
	return s, nil
}

func defaultLogger() *slog.Logger {
	v := strings.ToUpper(os.Getenv("HCOMM_DEBUG"))
	var lvl slog.Level
	switch v {
	case "", "WARN":
		lvl = slog.LevelWarn
	case "INFO", "1":
		lvl = slog.LevelInfo
	case "DEBUG", "TRACE", "2":
		lvl = slog.LevelDebug
	case "ERROR":
		lvl = slog.LevelError
	case "OFF", "0":
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// parseDuration accepts Go durations ("90s", "5m") and plain seconds ("30").
func parseDuration(v string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return time.Duration(f * float64(time.Second)), nil
	}
	return time.ParseDuration(v)
}

// parseBytes accepts "4194304", "4M", "512K", "1G" (binary units).
func parseBytes(v string) (int, error) {
	v = strings.TrimSpace(strings.ToUpper(v))
	mult := 1
	for suf, m := range map[string]int{"K": 1 << 10, "M": 1 << 20, "G": 1 << 30} {
		if t, ok := strings.CutSuffix(strings.TrimSuffix(strings.TrimSuffix(v, "B"), "I"), suf); ok {
			v, mult = t, m
			break
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("bad size %q", v)
	}
	return n * mult, nil
}
