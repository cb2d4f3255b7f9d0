package rma

import (
	"errors"
	"testing"

	"github.com/hcomm-go/hcomm/internal/errs"
)

// TestStridedShape: a strided access's shape, empty for no rows, and negative
// rows refused.
func TestStridedShape(t *testing.T) {
	for _, tc := range []struct {
		rows, n, pitch, local int
		want                  Shape
		bad                   bool
	}{
		{3, 8, 16, 32, Shape{Rows: 3, Len: 8, Pitch: 16, LocalPitch: 32}, false},
		{1, 8, 0, 0, Shape{Rows: 1, Len: 8}, false},
		{0, 8, 16, 16, Shape{Pitch: 16, LocalPitch: 16}, false},
		{-1, 8, 16, 16, Shape{}, true},
	} {
		s, err := Strided(tc.rows, tc.n, tc.pitch, tc.local)
		if s != tc.want || (err != nil) != tc.bad || tc.bad && !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("Strided(%d, %d, %d, %d) = %+v, %v", tc.rows, tc.n, tc.pitch, tc.local, s, err)
		}
	}
}

// TestSetAddAfterClose: a window made as its communicator closes is not
// kept in the closed set (nothing would release it): Add refuses it, and
// the caller closes it.
func TestSetAddAfterClose(t *testing.T) {
	var s Set
	a := &Window{}
	if !s.Add(a) {
		t.Fatal("Add to an open set refused")
	}
	s.Remove(a)
	s.Close()
	if s.Add(&Window{}) {
		t.Fatal("Add after Close kept the window")
	}
	if len(s.m) != 0 {
		t.Fatalf("closed set holds %d windows", len(s.m))
	}
}
