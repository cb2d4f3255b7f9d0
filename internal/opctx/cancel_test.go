package opctx

import (
	"context"
	"errors"
	"testing"
)

func TestCancel(t *testing.T) {
	var c Cancel
	if c.Err() != nil || isDone(&c) {
		t.Fatal("a new Cancel is cancelled")
	}
	if _, ok := c.Deadline(); ok || c.Value(key{}) != nil {
		t.Error("Cancel has a deadline or values")
	}
	child, stopChild := context.WithCancel(&c) // linked through AfterFunc, no goroutine
	defer stopChild()
	hooked := make(chan struct{})
	stop := context.AfterFunc(&c, func() { close(hooked) })
	defer stop()
	stopped := c.AfterFunc(func() { t.Error("a stopped hook ran") })
	if !stopped() {
		t.Error("stop of a pending hook reported false")
	}
	c.Cancel()
	c.Cancel() // idempotent
	<-hooked
	<-child.Done()
	if !errors.Is(c.Err(), context.Canceled) || !isDone(&c) || !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("after Cancel: Err %v, child %v", c.Err(), child.Err())
	}
	c.Reset()
	if c.Err() != nil || isDone(&c) {
		t.Fatal("Reset left it cancelled")
	}
	ran := make(chan struct{})
	c.Cancel()
	c.AfterFunc(func() { close(ran) }) // on a cancelled context: runs at once
	<-ran
}
