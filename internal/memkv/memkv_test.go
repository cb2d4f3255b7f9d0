package memkv

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestGetWaitsForSet(t *testing.T) {
	kv := New()
	ctx := context.Background()
	got := make(chan []byte, 1)
	go func() {
		v, _ := kv.Get(ctx, "k")
		got <- v
	}()
	if err := kv.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v := <-got; string(v) != "v" {
		t.Fatalf("Get = %q, want v", v)
	}
	if n, _ := kv.Add(ctx, "c", 2); n != 2 {
		t.Fatalf("Add = %d, want 2", n)
	}
	if n, _ := kv.Add(ctx, "c", -3); n != -1 {
		t.Fatalf("Add = %d, want -1", n)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := kv.Get(short, "missing"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get of a missing key: %v, want the context's error", err)
	}
}
