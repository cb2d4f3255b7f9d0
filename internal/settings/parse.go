package settings

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseSize parses a byte count: a non-negative decimal integer with an
// optional binary unit, case-insensitive: "4194304", "1024B", "512K",
// "512KB", "512KiB", "4M", "1G", "2T". A value that does not fit in an
// int64 is an error, never a wrapped-around number.
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	t = strings.TrimSuffix(t, "B")
	hadI := strings.HasSuffix(t, "I")
	t = strings.TrimSuffix(t, "I")
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	if hadI && mult == 1 || t == "" || t[0] == '+' || t[0] == '-' {
		return 0, fmt.Errorf("bad size %q: want a number of bytes such as 4194304, 1024B, 512K or 4M", s)
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return 0, fmt.Errorf("bad size %q: want a number of bytes such as 4194304, 1024B, 512K or 4M", s)
	}
	if v > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return v * mult, nil
}

// ParseSizeInt is ParseSize for values held in an int.
func ParseSizeInt(s string) (int, error) {
	v, err := ParseSize(s)
	if err != nil {
		return 0, err
	}
	if v > math.MaxInt {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int(v), nil
}

// ParseDuration parses a Go duration ("90s", "5m", "50us") or a plain
// number of seconds ("30", "0.5"). Negative, NaN, infinite and
// overflowing values are errors.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(t, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		switch {
		case math.IsNaN(f), math.IsInf(f, 0), errors.Is(err, strconv.ErrRange):
			return 0, fmt.Errorf("bad duration %q: not a finite number", s)
		case f < 0:
			return 0, fmt.Errorf("bad duration %q: negative", s)
		case f*float64(time.Second) >= math.MaxInt64:
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: want a duration such as 90s, 5m or 50us, or seconds", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("bad duration %q: negative", s)
	}
	return d, nil
}

// ParseBool parses 1/0, true/false, yes/no, on/off (any case).
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off", "":
		return false, nil
	}
	return false, fmt.Errorf("bad switch %q: want 1 or 0", s)
}

// ParseLevel parses a log level name as HCOMM_DEBUG takes it. off reports
// that logging is off.
func ParseLevel(s string) (lvl slog.Level, off bool, err error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "", "WARN", "WARNING":
		return slog.LevelWarn, false, nil
	case "INFO", "1":
		return slog.LevelInfo, false, nil
	case "DEBUG", "TRACE", "2":
		return slog.LevelDebug, false, nil
	case "ERROR":
		return slog.LevelError, false, nil
	case "OFF", "0", "NONE":
		return 0, true, nil
	}
	return 0, false, fmt.Errorf("bad level %q: want WARN, INFO, DEBUG, ERROR or OFF", s)
}

// ParseYield parses HCOMM_YIELD: 1 forces yielding, -1 forbids it, 0 is
// auto.
func ParseYield(s string) (int, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return 0, nil
	case "1", "true", "yes", "on":
		return 1, nil
	case "0", "false", "no", "off":
		return -1, nil
	}
	return 0, fmt.Errorf("bad value %q: want auto, 1 or 0", s)
}

// ParseTransport parses HCOMM_TRANSPORT: "" (auto), "shm" or "tcp".
func ParseTransport(s string) (string, error) {
	switch t := strings.ToLower(strings.TrimSpace(s)); t {
	case "", "auto":
		return "", nil
	case "shm", "tcp":
		return t, nil
	}
	return "", fmt.Errorf("bad transport %q: want shm, tcp or auto", s)
}

// ParseSignal parses HCOMM_DUMP_SIGNAL: "", "USR1" or "USR2" (a SIG
// prefix and any case accepted).
func ParseSignal(s string) (string, error) {
	t := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "SIG")
	switch t {
	case "", "USR1", "USR2":
		return t, nil
	}
	return "", fmt.Errorf("bad signal %q: want USR1 or USR2", s)
}
