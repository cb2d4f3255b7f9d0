package memkv

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// askedCtx tells when Done is first called: Get calls it only once it
// found its key missing and is about to wait.
type askedCtx struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func (c *askedCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}

func TestGetWaitsForSet(t *testing.T) {
	kv := New()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard only
	defer cancel()
	wait := &askedCtx{Context: ctx, asked: make(chan struct{})}
	type result struct {
		v   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		v, err := kv.Get(wait, "k")
		got <- result{v, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("Get of a key not set yet returned %q, %v without waiting", r.v, r.err)
	case <-wait.asked:
	}
	if err := kv.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || string(r.v) != "v" {
		t.Fatalf("Get = %q, %v, want v", r.v, r.err)
	}
	short, cancelShort := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancelShort()
	if _, err := kv.Get(short, "missing"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get of a missing key: %v, want the context's error", err)
	}
}

// The store keeps its own copies: what a caller does with the slice it
// passed to Set or got from Get does not change what the others get.
func TestCopies(t *testing.T) {
	kv := New()
	ctx := context.Background()
	in := []byte("abc")
	if err := kv.Set(ctx, "k", in); err != nil {
		t.Fatal(err)
	}
	in[0] = 'x'
	v, err := kv.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	v[1] = 'y'
	if v, _ := kv.Get(ctx, "k"); string(v) != "abc" {
		t.Fatalf("Get = %q after the callers wrote into their slices, want abc", v)
	}
}

func TestAdd(t *testing.T) {
	kv := New()
	ctx := context.Background()
	if n, _ := kv.Add(ctx, "c", 2); n != 2 {
		t.Fatalf("Add = %d, want 2", n)
	}
	if n, _ := kv.Add(ctx, "c", -3); n != -1 {
		t.Fatalf("Add = %d, want -1", n)
	}
	if v, _ := kv.Get(ctx, "c"); string(v) != "-1" {
		t.Fatalf("Get of the counter = %q, want -1", v)
	}
}
