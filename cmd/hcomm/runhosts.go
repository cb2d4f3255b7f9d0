package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Limits on host lists, so that a typo cannot make the launcher allocate
// without bound.
const (
	maxSlots = 1 << 16 // ranks on one host
	maxRanks = 1 << 20 // ranks in one job
)

// hostSlots is one entry of a host list: a host and how many ranks it takes.
type hostSlots struct {
	name  string
	slots int
}

// String formats h the way parseHostEntry reads it.
func (h hostSlots) String() string {
	name := h.name
	if strings.Contains(name, ":") {
		name = "[" + name + "]"
	}
	return name + ":" + strconv.Itoa(h.slots)
}

// parseHostList parses a --hosts value: comma-separated entries, each
// "host" (one slot) or "host:slots"; IPv6 addresses go in brackets.
func parseHostList(s string) ([]hostSlots, error) {
	var hosts []hostSlots
	for e := range strings.SplitSeq(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			return nil, fmt.Errorf("host list %q: empty entry", s)
		}
		h, _, err := parseHostEntry(e)
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// parseHostFile parses a host file: one host per line, as "host",
// "host:slots" or "host slots=N"; "#" starts a comment; blank lines are
// skipped.
func parseHostFile(data []byte) ([]hostSlots, error) {
	var hosts []hostSlots
	for i, line := range strings.Split(string(data), "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		h, explicit, err := parseHostEntry(fields[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		for _, f := range fields[1:] {
			v, ok := strings.CutPrefix(f, "slots=")
			if !ok {
				return nil, fmt.Errorf("line %d: unknown field %q (want slots=N)", i+1, f)
			}
			if explicit {
				return nil, fmt.Errorf("line %d: slots given twice", i+1)
			}
			if h.slots, err = parseSlots(v); err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			explicit = true
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// parseHostEntry parses "host", "host:slots", "[v6addr]" or "[v6addr]:slots";
// explicit reports whether the entry gave the slots.
func parseHostEntry(e string) (h hostSlots, explicit bool, err error) {
	h = hostSlots{name: e, slots: 1}
	slots := ""
	if rest, ok := strings.CutPrefix(e, "["); ok {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return h, false, fmt.Errorf("host %q: missing ]", e)
		}
		h.name, rest = rest[:end], rest[end+1:]
		if rest != "" {
			if slots, explicit = strings.CutPrefix(rest, ":"); !explicit {
				return h, false, fmt.Errorf("host %q: want [address]:slots", e)
			}
		}
	} else if i := strings.IndexByte(e, ':'); i >= 0 {
		h.name, slots, explicit = e[:i], e[i+1:], true
		if strings.Contains(slots, ":") {
			return h, false, fmt.Errorf("host %q: put IPv6 addresses in brackets, as [addr]:slots", e)
		}
	}
	if err := checkHostName(h.name); err != nil {
		return h, false, err
	}
	if explicit {
		if h.slots, err = parseSlots(slots); err != nil {
			return h, false, fmt.Errorf("host %q: %w", e, err)
		}
	}
	return h, explicit, nil
}

func parseSlots(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxSlots {
		return 0, fmt.Errorf("slots %q: want a number from 1 to %d", s, maxSlots)
	}
	return n, nil
}

// checkHostName accepts the host names, addresses and user@host forms that
// ssh takes, and refuses anything else, in particular names that a remote
// shell command could read as an option (leading "-") or split (blanks).
func checkHostName(h string) error {
	if h == "" {
		return fmt.Errorf("empty host name")
	}
	if h[0] == '-' {
		return fmt.Errorf("host %q: must not start with '-'", h)
	}
	for _, c := range []byte(h) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '-' || c == '_' || c == ':' || c == '%' || c == '@':
		default:
			return fmt.Errorf("host %q: invalid character %q", h, c)
		}
	}
	return nil
}

// placement is where one rank runs.
type placement struct {
	rank      int
	host      string // as given, or "localhost"
	local     bool   // started directly rather than through the rsh command
	localRank int    // index among the ranks on the same host
	localSize int    // number of ranks on the same host
}

// assign places n ranks on hosts, filling each host's slots in order. With
// no hosts every rank runs on this machine; n = 0 means one rank per slot.
// isLocal reports whether a host name denotes this machine.
func assign(hosts []hostSlots, n int, isLocal func(string) bool) ([]placement, error) {
	if len(hosts) == 0 {
		if n < 1 {
			return nil, fmt.Errorf("-n %d: need at least one rank", n)
		}
		hosts = []hostSlots{{name: "localhost", slots: min(n, maxRanks)}}
	}
	total := 0
	for _, h := range hosts {
		total += h.slots // no overflow: slots <= maxSlots
	}
	switch {
	case n == 0:
		n = total
	case n < 0:
		return nil, fmt.Errorf("-n %d: need at least one rank", n)
	case n > maxRanks:
	case n > total:
		return nil, fmt.Errorf("-n %d: the hosts have only %d slots", n, total)
	}
	if n > maxRanks {
		return nil, fmt.Errorf("%d ranks: at most %d are possible", n, maxRanks)
	}
	places := make([]placement, 0, n)
	perHost := make(map[string]int)
	for _, h := range hosts {
		local := isLocal(h.name)
		for range h.slots {
			if len(places) == n {
				break
			}
			places = append(places, placement{rank: len(places), host: h.name, local: local, localRank: perHost[h.name]})
			perHost[h.name]++
		}
	}
	for i := range places {
		places[i].localSize = perHost[places[i].host]
	}
	return places, nil
}

// isLocalHost reports whether name denotes this machine: localhost, a
// loopback address, or this machine's host name (in full or up to the
// first dot).
func isLocalHost(name string) bool {
	switch strings.ToLower(name) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	self, err := os.Hostname()
	if err != nil || self == "" {
		return false
	}
	short := func(s string) string {
		s, _, _ = strings.Cut(strings.ToLower(s), ".")
		return s
	}
	return strings.EqualFold(name, self) || (!strings.Contains(name, ".") && short(name) == short(self))
}
