package store

import (
	"context"
	"errors"
	"fmt"
)

// WithPrefix returns a view of s in which every key is prefix + "/" + key, so
// that users of one shared store (communicators, for instance) cannot see or
// disturb each other's keys. Views nest.
//
// Closing the view fails its own pending and later calls with ErrClosed but
// leaves s open: s belongs to whoever created it. An empty prefix gives a
// view with s's own keys, a way to lend s to code that closes what it is
// given.
func WithPrefix(s Store, prefix string) Store {
	ctx, cancel := context.WithCancel(context.Background())
	if prefix != "" {
		prefix += "/"
	}
	return &prefixStore{base: s, prefix: prefix, life: ctx, cancel: cancel}
}

type prefixStore struct {
	base   Store
	prefix string
	life   context.Context // ends when the view is closed
	cancel context.CancelFunc
}

// bind returns a context that ends with ctx or when the view is closed.
func (p *prefixStore) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.life, cancel)
	return ctx, func() { stop(); cancel() }
}

// result replaces err with ErrClosed when the call failed because the view
// was closed.
func (p *prefixStore) result(op, key string, err error) error {
	if err != nil && p.life.Err() != nil && errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: %s %q", ErrClosed, op, key)
	}
	return err
}

func (p *prefixStore) closedErr(op, key string) error {
	if p.life.Err() != nil {
		return fmt.Errorf("%w: %s %q", ErrClosed, op, key)
	}
	return nil
}

func (p *prefixStore) Set(ctx context.Context, key string, value []byte) error {
	if err := p.closedErr("set", key); err != nil {
		return err
	}
	ctx, done := p.bind(ctx)
	defer done()
	return p.result("set", key, p.base.Set(ctx, p.prefix+key, value))
}

func (p *prefixStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := p.closedErr("get", key); err != nil {
		return nil, err
	}
	ctx, done := p.bind(ctx)
	defer done()
	v, err := p.base.Get(ctx, p.prefix+key)
	return v, p.result("get", key, err)
}

func (p *prefixStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := p.closedErr("add", key); err != nil {
		return 0, err
	}
	ctx, done := p.bind(ctx)
	defer done()
	n, err := p.base.Add(ctx, p.prefix+key, delta)
	return n, p.result("add", key, err)
}

func (p *prefixStore) Wait(ctx context.Context, keys ...string) error {
	first := ""
	if len(keys) > 0 {
		first = keys[0]
	}
	if err := p.closedErr("wait", first); err != nil {
		return err
	}
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = p.prefix + k
	}
	ctx, done := p.bind(ctx)
	defer done()
	return p.result("wait", first, p.base.Wait(ctx, full...))
}

func (p *prefixStore) Delete(ctx context.Context, key string) error {
	if err := p.closedErr("delete", key); err != nil {
		return err
	}
	ctx, done := p.bind(ctx)
	defer done()
	return p.result("delete", key, p.base.Delete(ctx, p.prefix+key))
}

// Close closes the view, not the underlying store.
func (p *prefixStore) Close() error {
	p.cancel()
	return nil
}
