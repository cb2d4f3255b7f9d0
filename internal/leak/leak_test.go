package leak

import (
	"reflect"
	"strings"
	"testing"
)

func TestSet(t *testing.T) {
	var s Set
	a, b := new(int), new(int)
	s.Add(a, "b object")
	s.Add(b, "a object")
	if got := s.List(); !reflect.DeepEqual(got, []string{"a object", "b object"}) {
		t.Errorf("List = %q, want both, sorted", got)
	}
	s.Remove(a)
	s.Remove(a)
	if got := s.List(); !reflect.DeepEqual(got, []string{"a object"}) {
		t.Errorf("List after Remove = %q", got)
	}
}

func made() string { return Caller("github.com/hcomm-go/hcomm/internal/leak") }

// A test file of the package counts as outside it: Caller names the line
// in this file that called made.
func TestCaller(t *testing.T) {
	at := made()
	if !strings.Contains(at, "leak_test.go:") {
		t.Errorf("Caller = %q, want this test's line", at)
	}
}
