package local

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/hcomm-go/hcomm/internal/wire"
)

// pendingSubs returns how many sub-fabrics f still remembers.
func (f *Fabric) pendingSubs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// TestSubForgets checks that every rank asking for a key gets the same
// fabric, and that the parent forgets the key once all have: a thousand
// splits leave nothing behind.
func TestSubForgets(t *testing.T) {
	f := NewFabric(4)
	for i := range 1000 {
		key := fmt.Sprintf("split%d", i)
		n := 1 + i%4
		var first *Fabric
		for r := range n {
			s, err := f.Sub(key, n)
			if err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = s
			}
			if s != first {
				t.Fatalf("%s: rank %d got another fabric", key, r)
			}
			if want := 1; r < n-1 && f.pendingSubs() != want {
				t.Fatalf("%s: %d pending sub-fabrics after %d of %d claims, want %d", key, f.pendingSubs(), r+1, n, want)
			}
		}
		if first.n != n {
			t.Fatalf("%s: fabric of %d ranks, want %d", key, first.n, n)
		}
	}
	if k := f.pendingSubs(); k != 0 {
		t.Fatalf("%d sub-fabrics remembered after every rank claimed its own", k)
	}
}

// TestSubSizeMismatch checks that ranks disagreeing on a sub-fabric's size
// get an error, and that a bad size is refused.
func TestSubSizeMismatch(t *testing.T) {
	f := NewFabric(3)
	if _, err := f.Sub("a", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Sub("a", 2); err == nil {
		t.Fatal("a second rank asking for 2 ranks of a 3-rank fabric got no error")
	}
	if _, err := f.Sub("b", 0); err == nil {
		t.Fatal("a fabric of 0 ranks was created")
	}
}

// TestSubCarries checks that the ranks of a sub-fabric reach each other
// through it.
func TestSubCarries(t *testing.T) {
	f := NewFabric(2)
	ctx := context.Background()
	fp := &wire.Fingerprint{}
	subs := make([]*Fabric, 2)
	for r := range subs {
		var err error
		if subs[r], err = f.Sub("x", 2); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := subs[0].Endpoint(0).Send(ctx, 1, fp, []byte("hello")); err != nil {
			t.Error(err)
		}
	}()
	got := make([]byte, 5)
	if err := subs[1].Endpoint(1).Recv(ctx, 0, fp, got); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if string(got) != "hello" {
		t.Fatalf("received %q", got)
	}
}
