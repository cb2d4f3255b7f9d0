package culprit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/notice"
)

// fakeNotes holds notes by world rank and an optional notice.
type fakeNotes struct {
	notes  map[int]notice.Note
	notice *notice.Note
	looked int
}

func (f *fakeNotes) FailureNote(id string, world, size int) (notice.Note, bool) {
	f.looked++
	n, ok := f.notes[world]
	return n, ok
}

func (f *fakeNotes) WatchNotice(ctx context.Context, id string, size int) (notice.Note, error) {
	if f.notice == nil {
		<-ctx.Done()
		return notice.Note{}, ctx.Err()
	}
	return *f.notice, nil
}

func lost(p int) error    { return &errs.PeerError{Peer: p, Kind: errs.ErrPeerLost} }
func aborted(p int) error { return &errs.PeerError{Peer: p, Kind: errs.ErrAborted} }

func TestWhyLost(t *testing.T) {
	for _, tt := range []struct {
		name     string
		notes    map[int]notice.Note
		notice   *notice.Note
		err      error
		peer     int
		kind     error
		contains string
	}{
		{"no note: the peer is lost", nil, nil, lost(2), 2, errs.ErrPeerLost, "lost rank 2"},
		{"its note names another lost rank", map[int]notice.Note{2: {From: 2, Lost: 3, Text: "x"}}, nil, lost(2), 3, errs.ErrPeerLost, "as rank 2 reported before it failed"},
		{"its note is of another kind", map[int]notice.Note{2: {From: 2, Lost: -1, Text: "timed out"}}, nil, lost(2), 2, errs.ErrAborted, "its connection dropped after it reported: timed out"},
		{"an abort stays", map[int]notice.Note{2: {From: 2, Lost: -1, Text: "x"}}, nil, aborted(2), 2, errs.ErrAborted, "rank 2 aborted"},
		{"no note, the notice names the cause", nil, &notice.Note{From: 3, Lost: 1, Text: "y"}, lost(2), 1, errs.ErrPeerLost, "as rank 3 reported"},
		{"note names this rank", map[int]notice.Note{2: {From: 2, Lost: 0, Text: "x"}}, nil, lost(2), 2, errs.ErrAborted, "dropped"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &Finder{Notes: &fakeNotes{notes: tt.notes, notice: tt.notice}, ID: "c", Rank: 0, Members: []int{0, 1, 2, 3}}
			err := f.WhyLost(tt.err)
			var pe *errs.PeerError
			if !errors.As(err, &pe) || pe.Peer != tt.peer || pe.Kind != tt.kind || !strings.Contains(err.Error(), tt.contains) {
				t.Fatalf("WhyLost = %v, want rank %d, %v, mentioning %q", err, tt.peer, tt.kind, tt.contains)
			}
		})
	}
}

func TestWhyLostOnce(t *testing.T) {
	notes := &fakeNotes{notes: map[int]notice.Note{2: {From: 2, Lost: 3, Text: "x"}}}
	f := &Finder{Notes: notes, Rank: 0, Members: []int{0, 1, 2, 3}}
	err := lost(2)
	a, b := f.WhyLost(err), f.WhyLost(err)
	if a != b || notes.looked != 1 {
		t.Fatalf("two lookups of one error: %v, %v, %d lookups", a, b, notes.looked)
	}
	// The notice, once seen, stands for what follows.
	n := f.Noticed(notice.Note{From: 1, Lost: -1, Text: "operator gave up"})
	if got := f.WhyLost(lost(3)); got != n {
		t.Fatalf("after the notice: %v, want %v", got, n)
	}
}

func TestNoNotes(t *testing.T) {
	var f Finder
	if err := lost(1); f.WhyLost(err) != err {
		t.Fatal("a Finder without notes changed the error")
	}
}

func TestFromNotice(t *testing.T) {
	relay := notice.Note{From: 2, Lost: -1, Text: errs.OpText("AllReduce", 4, 2, 1, "rank 1 failed: operator gave up")}
	for _, tt := range []struct {
		n    notice.Note
		peer int
		kind error
	}{
		{notice.Note{From: 2, Lost: 3}, 3, errs.ErrPeerLost},
		{notice.Note{From: 2, Lost: -1, Text: "operator gave up"}, 2, errs.ErrAborted},
		{relay, 1, errs.ErrAborted},
	} {
		pe := FromNotice(tt.n, 0, 4)
		if pe.Peer != tt.peer || pe.Kind != tt.kind {
			t.Errorf("FromNotice(%+v) = %v, want rank %d, %v", tt.n, pe, tt.peer, tt.kind)
		}
	}
}

func TestRelayed(t *testing.T) {
	mm := &errs.PeerError{Peer: 1, Kind: errs.ErrAborted, Cause: errors.New("rank 2 called Broadcast while this rank called AllReduce")}
	if err := Relayed(mm); !errors.Is(err, errs.ErrMismatch) || !errors.Is(err, errs.ErrAborted) {
		t.Fatalf("Relayed = %v, want ErrMismatch and ErrAborted", err)
	}
	other := &errs.PeerError{Peer: 1, Kind: errs.ErrAborted, Cause: errors.New("operator gave up")}
	if Relayed(other) != other {
		t.Fatal("Relayed changed an abort that was no mismatch")
	}
	if Peer(Relayed(mm)) != 1 || Peer(errors.New("x")) != -1 || Peer(&errs.MismatchError{Peer: 3}) != 3 {
		t.Fatal("Peer")
	}
	if Lost(lost(2), 4) != 2 || Lost(aborted(2), 4) != -1 || Lost(lost(7), 4) != -1 {
		t.Fatal("Lost")
	}
}
