package errs

import (
	"errors"
	"strconv"
	"strings"
)

// A rank that fails tells its peers why as text (the transports' abort
// frame or shared-segment reason, the store's failure note): the message
// of its OpError, which OpText formats. A rank that fails because a peer
// failed involves that peer in its own OpError, so the culprit of a
// failure travels with its relay: Origin reads it back.

// OpText is the message of an OpError: "hcomm: Op #seq on rank R (peer P):
// cause", without " #seq" when seq is 0 and without " (peer P)" when peer
// is negative.
func OpText(op string, seq uint64, rank, peer int, cause string) string {
	var b strings.Builder
	b.WriteString("hcomm: ")
	b.WriteString(op)
	if seq > 0 {
		b.WriteString(" #")
		b.WriteString(strconv.FormatUint(seq, 10))
	}
	b.WriteString(" on rank ")
	b.WriteString(strconv.Itoa(rank))
	if peer >= 0 {
		b.WriteString(" (peer ")
		b.WriteString(strconv.Itoa(peer))
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(TrimPrefix(cause))
	return b.String()
}

// ParseOpText reads back what OpText wrote: the rank, the peer (-1 if
// none) and the cause. ok is false if s is not such a message.
func ParseOpText(s string) (rank, peer int, cause string, ok bool) {
	rest, found := strings.CutPrefix(s, "hcomm: ")
	if !found {
		return 0, 0, "", false
	}
	i := strings.Index(rest, " on rank ")
	if i < 0 || strings.ContainsAny(rest[:i], ":()") {
		return 0, 0, "", false
	}
	rest = rest[i+len(" on rank "):]
	rank, rest, ok = number(rest)
	if !ok {
		return 0, 0, "", false
	}
	peer = -1
	if r, found := strings.CutPrefix(rest, " (peer "); found {
		if peer, rest, ok = number(r); !ok {
			return 0, 0, "", false
		}
		if rest, found = strings.CutPrefix(rest, ")"); !found {
			return 0, 0, "", false
		}
	}
	if cause, found = strings.CutPrefix(rest, ": "); !found {
		return 0, 0, "", false
	}
	return rank, peer, cause, true
}

// number reads a decimal int in [0, 1<<31) at the start of s.
func number(s string) (int, string, bool) {
	i := 0
	for i < len(s) && i < 10 && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, s, false
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil || n > 1<<31-1 {
		return 0, s, false
	}
	return n, s[i:], true
}

// Origin returns the failure a relayed abort stands for. A peer that
// aborted because of its own failure involving another rank (the rank it
// lost, the rank that aborted or whose call differed, the rank it timed
// out waiting for) told its peers so in its message (an OpError's, or the
// PeerError of the communicator's notice); the error err then
// names that rank, not the relaying peer, and says who relayed it. The
// origin is never this rank (self). Any other error is returned as it is.
func Origin(err error, self, size int) error {
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Kind != ErrAborted || pe.Cause == nil {
		return err
	}
	text := pe.Cause.Error()
	rank, peer, _, ok := ParseOpText(text)
	if !ok {
		// A rank failed by the communicator's notice aborts with the
		// notice's error, a PeerError's message.
		rank, peer, ok = pe.Peer, peerText(text), true
	}
	if !ok || rank != pe.Peer || peer < 0 || peer >= size || peer == pe.Peer || peer == self {
		return err
	}
	return &PeerError{Peer: peer, Kind: ErrAborted, Cause: &relay{by: pe.Peer, orig: pe.Cause}}
}

// peerText returns the rank a PeerError's message of an aborted or
// failed rank names ("rank P failed: ...", "rank P aborted"), or -1.
func peerText(s string) int {
	rest, found := strings.CutPrefix(s, "rank ")
	if !found {
		return -1
	}
	p, rest, ok := number(rest)
	if !ok || !strings.HasPrefix(rest, " failed: ") && rest != " aborted" {
		return -1
	}
	return p
}

// relay is the cause of a failure as a peer relayed it: the peer's own
// message, whose "this rank" is the peer.
type relay struct {
	by   int
	orig error
}

func (r *relay) Error() string {
	return "as rank " + strconv.Itoa(r.by) + " reported: " + r.orig.Error()
}
func (r *relay) Unwrap() error { return r.orig }
