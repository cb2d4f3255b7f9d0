package errs

import (
	"errors"
	"strings"
	"testing"
)

func TestOpText(t *testing.T) {
	for _, tt := range []struct {
		op         string
		seq        uint64
		rank, peer int
		cause      string
		want       string
	}{
		{"AllReduce", 3, 2, 1, "rank 1 aborted", "hcomm: AllReduce #3 on rank 2 (peer 1): rank 1 aborted"},
		{"Split", 0, 0, -1, "hcomm: communicator closed", "hcomm: Split on rank 0: communicator closed"},
	} {
		s := OpText(tt.op, tt.seq, tt.rank, tt.peer, tt.cause)
		if s != tt.want {
			t.Errorf("OpText = %q, want %q", s, tt.want)
		}
		rank, peer, cause, ok := ParseOpText(s)
		if !ok || rank != tt.rank || peer != tt.peer || cause != TrimPrefix(tt.cause) {
			t.Errorf("ParseOpText(%q) = %d %d %q %v", s, rank, peer, cause, ok)
		}
	}
	for _, s := range []string{"", "operator gave up", "hcomm: X on rank", "hcomm: X on rank 1 (peer 2: y",
		"hcomm: X on rank 1 (peer x): y", "hcomm: X on rank 99999999999: y", "hcomm: a (b) on rank 1: y"} {
		if _, _, _, ok := ParseOpText(s); ok {
			t.Errorf("ParseOpText(%q) accepted", s)
		}
	}
}

func FuzzParseOpText(f *testing.F) {
	f.Add("hcomm: AllReduce #3 on rank 2 (peer 1): rank 1 aborted")
	f.Add("hcomm: Recv on rank 0: x")
	f.Fuzz(func(t *testing.T, s string) {
		rank, peer, cause, ok := ParseOpText(s)
		if !ok {
			return
		}
		if rank < 0 || peer < -1 || !strings.HasSuffix(s, cause) {
			t.Fatalf("ParseOpText(%q) = %d %d %q", s, rank, peer, cause)
		}
	})
}

func TestOrigin(t *testing.T) {
	relayed := &PeerError{Peer: 2, Kind: ErrAborted,
		Cause: errors.New(OpText("AllReduce", 3, 2, 1, "rank 1 failed: operator gave up"))}
	err := Origin(relayed, 0, 3)
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Peer != 1 || pe.Kind != ErrAborted {
		t.Fatalf("Origin = %#v, want rank 1 aborted", err)
	}
	if want := "rank 1 failed: as rank 2 reported: hcomm: AllReduce #3 on rank 2 (peer 1): rank 1 failed: operator gave up"; err.Error() != want {
		t.Fatalf("Origin = %q, want %q", err, want)
	}
	notice := &PeerError{Peer: 2, Kind: ErrAborted, Cause: &PeerError{Peer: 1, Kind: ErrAborted, Cause: errors.New("operator gave up")}}
	if err := Origin(notice, 0, 3); !errors.As(err, &pe) || pe.Peer != 1 {
		t.Fatalf("Origin of a notice's relay = %v, want rank 1", err)
	}
	for name, err := range map[string]error{
		"lost in a notice": &PeerError{Peer: 2, Kind: ErrAborted, Cause: errors.New("lost rank 1")},
		"aborted, more":    &PeerError{Peer: 2, Kind: ErrAborted, Cause: errors.New("rank 1 aborted twice")},
		"own abort":        &PeerError{Peer: 1, Kind: ErrAborted, Cause: errors.New("operator gave up")},
		"no peer":          &PeerError{Peer: 2, Kind: ErrAborted, Cause: errors.New(OpText("AllReduce", 3, 2, -1, "timed out"))},
		"names self":       &PeerError{Peer: 2, Kind: ErrAborted, Cause: errors.New(OpText("AllReduce", 3, 2, 0, "x"))},
		"other sender":     &PeerError{Peer: 2, Kind: ErrAborted, Cause: errors.New(OpText("AllReduce", 3, 1, 0, "x"))},
		"out of range":     &PeerError{Peer: 2, Kind: ErrAborted, Cause: errors.New(OpText("AllReduce", 3, 2, 7, "x"))},
		"lost":             &PeerError{Peer: 2, Kind: ErrPeerLost, Cause: errors.New(OpText("AllReduce", 3, 2, 1, "x"))},
		"not a peer":       errors.New("x"),
	} {
		if got := Origin(err, 0, 3); got != err {
			t.Errorf("%s: Origin = %v, want it unchanged", name, got)
		}
	}
}
