// Package memkv is an in-memory rendezvous store for ranks that are
// goroutines of one process: what the transports' and the notice
// package's tests use where a real store server is not the point.
package memkv

import (
	"context"
	"strconv"
	"sync"
)

// KV holds keys in memory; Get waits until its key is set. Use New.
type KV struct {
	mu      sync.Mutex
	m       map[string][]byte
	changed chan struct{} // closed and replaced at every Set
}

// New returns an empty store.
func New() *KV { return &KV{m: map[string][]byte{}, changed: make(chan struct{})} }

// Set stores a copy of value under key and wakes every waiting Get.
func (kv *KV) Set(_ context.Context, key string, value []byte) error {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	kv.m[key] = append([]byte(nil), value...)
	close(kv.changed)
	kv.changed = make(chan struct{})
	return nil
}

// Get returns a copy of the value of key, waiting until it is set or ctx
// ends.
func (kv *KV) Get(ctx context.Context, key string) ([]byte, error) {
	for {
		kv.mu.Lock()
		v, ok := kv.m[key]
		ch := kv.changed
		if ok {
			v = append([]byte(nil), v...)
		}
		kv.mu.Unlock()
		if ok {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

// Add adds delta to the decimal counter under key (0 if unset) and
// returns the new value.
func (kv *KV) Add(_ context.Context, key string, delta int64) (int64, error) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	n, _ := strconv.ParseInt(string(kv.m[key]), 10, 64)
	n += delta
	kv.m[key] = []byte(strconv.FormatInt(n, 10))
	return n, nil
}
