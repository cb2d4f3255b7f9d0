// Package storetest is the test suite every implementation of store.Store
// passes: values, blocking Get and Wait, atomic Add, Delete, deadlines,
// cancellation, Close and awkward keys.
//
// A backend's test calls Run with a function that makes a fresh shared
// store for one test and returns an Opener, which gives a new handle on that
// store as another rank would:
//
//	func TestSuite(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Opener {
//			srv := startMyServer(t)
//			return func(t *testing.T) store.Store { return dialMyServer(t, srv) }
//		})
//	}
//
// The handles an Opener returns may be closed by the suite; the Opener
// should also close them (t.Cleanup) when the test ends.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/store"
)

// Opener returns a new handle on the store under test.
type Opener func(t *testing.T) store.Store

// Tests are the suite's tests, by name.
var Tests = []struct {
	Name string
	Run  func(t *testing.T, open Opener)
}{
	{"SetGet", testSetGet},
	{"GetWaitsForSet", testGetWaitsForSet},
	{"AddConcurrent", testAddConcurrent},
	{"AddErrors", testAddErrors},
	{"WaitMany", testWaitMany},
	{"Delete", testDelete},
	{"Timeout", testTimeout},
	{"Cancel", testCancel},
	{"CloseUnblocks", testCloseUnblocks},
	{"Keys", testKeys},
}

// Run runs every test of the suite as a subtest of t, each on a fresh store
// made by fresh.
func Run(t *testing.T, fresh func(t *testing.T) Opener) {
	for _, tt := range Tests {
		t.Run(tt.Name, func(t *testing.T) { tt.Run(t, fresh(t)) })
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testSetGet(t *testing.T, open Opener) {
	ctx := testCtx(t)
	a, b := open(t), open(t)
	values := []struct {
		key   string
		value []byte
	}{
		{"addr/0", []byte("10.0.0.1:4000")},
		{"empty", []byte{}},
		{"binary", []byte{0, 1, 2, 0xff, 0, '\n'}},
		{"big", bytes.Repeat([]byte("0123456789abcdef"), 1<<14)},
		{"addr/0", []byte("10.0.0.2:4001")}, // overwrite
	}
	for _, v := range values {
		if err := a.Set(ctx, v.key, v.value); err != nil {
			t.Fatalf("Set(%q): %v", v.key, err)
		}
		for i, s := range []store.Store{a, b} {
			got, err := s.Get(ctx, v.key)
			if err != nil {
				t.Fatalf("handle %d: Get(%q): %v", i, v.key, err)
			}
			if !bytes.Equal(got, v.value) {
				t.Fatalf("handle %d: Get(%q) = %d bytes %.20q, want %d bytes %.20q", i, v.key, len(got), got, len(v.value), v.value)
			}
		}
	}
}

func testGetWaitsForSet(t *testing.T, open Opener) {
	ctx := testCtx(t)
	a, b := open(t), open(t)
	type result struct {
		v   []byte
		err error
	}
	res := make(chan result, 1)
	go func() {
		v, err := a.Get(ctx, "late")
		res <- result{v, err}
	}()
	select {
	case r := <-res:
		t.Fatalf("Get returned before Set: %q, %v", r.v, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := b.Set(ctx, "late", []byte("here")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res:
		if r.err != nil || string(r.v) != "here" {
			t.Fatalf("Get = %q, %v; want \"here\"", r.v, r.err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Get still blocked 3s after Set")
	}
}

func testAddConcurrent(t *testing.T, open Opener) {
	ctx := testCtx(t)
	const workers, adds = 6, 25
	handles := []store.Store{open(t), open(t), open(t)}
	var (
		mu   sync.Mutex
		seen []int64
		wg   sync.WaitGroup
	)
	errc := make(chan error, workers)
	for w := range workers {
		s := handles[w%len(handles)]
		wg.Go(func() {
			for range adds {
				n, err := s.Add(ctx, "counter", 1)
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				seen = append(seen, n)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	// Atomic increments hand out each value 1..total exactly once.
	slices.Sort(seen)
	for i, n := range seen {
		if n != int64(i+1) {
			t.Fatalf("Add results sorted: position %d holds %d, want %d (results %v)", i, n, i+1, seen)
		}
	}
	got, err := handles[0].Get(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(workers * adds); string(got) != want {
		t.Fatalf("counter = %q, want %q", got, want)
	}
	if n, err := handles[1].Add(ctx, "counter", -workers*adds-5); err != nil || n != -5 {
		t.Fatalf("Add(-%d) = %d, %v; want -5", workers*adds+5, n, err)
	}
}

func testAddErrors(t *testing.T, open Opener) {
	ctx := testCtx(t)
	s := open(t)
	if err := s.Set(ctx, "text", []byte("twelve")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, "text", 1); !errors.Is(err, store.ErrNotInteger) {
		t.Errorf("Add on non-integer: err = %v, want store.ErrNotInteger", err)
	}
	if err := s.Set(ctx, "big", []byte("9223372036854775807")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, "big", 1); !errors.Is(err, store.ErrNotInteger) {
		t.Errorf("overflowing Add: err = %v, want store.ErrNotInteger", err)
	}
	if n, err := s.Add(ctx, "big", 0); err != nil || n != 1<<63-1 {
		t.Errorf("Add(0) after failed Add = %d, %v; want unchanged", n, err)
	}
	if n, err := s.Add(ctx, "fresh", -3); err != nil || n != -3 {
		t.Errorf("Add on missing key = %d, %v; want -3", n, err)
	}
}

func testWaitMany(t *testing.T, open Opener) {
	ctx := testCtx(t)
	a, b := open(t), open(t)
	if err := a.Wait(ctx); err != nil {
		t.Fatalf("Wait() with no keys: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Wait(ctx, "w/0", "w/1", "w/2", "w/1") }()
	for i := range 3 {
		select {
		case err := <-done:
			t.Fatalf("Wait returned with only %d of 3 keys set: %v", i, err)
		case <-time.After(30 * time.Millisecond):
		}
		var err error
		if i == 1 {
			_, err = b.Add(ctx, fmt.Sprintf("w/%d", i), 1) // Add sets too
		} else {
			err = b.Set(ctx, fmt.Sprintf("w/%d", i), nil)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Wait still blocked 3s after all keys were set")
	}
	// All present: returns at once.
	if err := a.Wait(ctx, "w/2", "w/0"); err != nil {
		t.Fatal(err)
	}
}

func testDelete(t *testing.T, open Opener) {
	ctx := testCtx(t)
	s := open(t)
	if err := s.Set(ctx, "gone", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if v, err := s.Get(short, "gone"); !errors.Is(err, store.ErrTimeout) {
		t.Fatalf("Get after Delete = %q, %v; want store.ErrTimeout", v, err)
	}
	if err := s.Set(ctx, "gone", []byte("back")); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(ctx, "gone"); err != nil || string(v) != "back" {
		t.Fatalf("Get after re-Set = %q, %v", v, err)
	}
}

func testTimeout(t *testing.T, open Opener) {
	s := open(t)
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Get", func(ctx context.Context) error { _, err := s.Get(ctx, "never"); return err }},
		{"Wait", func(ctx context.Context) error { return s.Wait(ctx, "never", "nor-this") }},
	}
	for _, c := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		err := c.call(ctx)
		elapsed := time.Since(start)
		cancel()
		if !errors.Is(err, store.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: err = %v, want store.ErrTimeout and context.DeadlineExceeded", c.name, err)
		}
		if elapsed > time.Second {
			t.Errorf("%s: returned %v after a 100ms deadline", c.name, elapsed)
		}
	}
	// The store still works after abandoned waits.
	ctx := testCtx(t)
	if err := s.Set(ctx, "never", []byte("now")); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(ctx, "never"); err != nil || string(v) != "now" {
		t.Fatalf("Get after timeouts = %q, %v", v, err)
	}
}

func testCancel(t *testing.T, open Opener) {
	s := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := s.Get(ctx, "never"); done <- err }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrTimeout) {
			t.Fatalf("cancelled Get: err = %v, want context.Canceled and not store.ErrTimeout", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Get still blocked 2s after cancel")
	}
	if err := s.Set(ctx, "k", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Set with a cancelled context: err = %v", err)
	}
}

func testCloseUnblocks(t *testing.T, open Opener) {
	s := open(t)
	ctx := testCtx(t)
	done := make(chan error, 2)
	go func() { _, err := s.Get(ctx, "never"); done <- err }()
	go func() { done <- s.Wait(ctx, "never") }()
	time.Sleep(30 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, store.ErrClosed) {
				t.Fatalf("waiter after Close: err = %v, want store.ErrClosed", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("waiter still blocked 2s after Close")
		}
	}
	if err := s.Set(ctx, "k", nil); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Set after Close: err = %v, want store.ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func testKeys(t *testing.T, open Opener) {
	ctx := testCtx(t)
	s := open(t)
	keys := []string{"", "a", "A", "../x", "../../etc/passwd", "/abs", "a/b", "a%2fb", ".", "..", ".lock", "\x00", "ключ", strings.Repeat("z", 300)}
	for i, k := range keys {
		if err := s.Set(ctx, k, []byte(fmt.Sprint(i))); err != nil {
			t.Fatalf("Set(%q): %v", k, err)
		}
	}
	for i, k := range keys {
		if v, err := s.Get(ctx, k); err != nil || string(v) != fmt.Sprint(i) {
			t.Fatalf("Get(%q) = %q, %v; want %q", k, v, err, fmt.Sprint(i))
		}
	}
	if err := s.Set(ctx, strings.Repeat("k", store.MaxKeySize+1), nil); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("Set with a %d-byte key: err = %v, want ErrTooLarge", store.MaxKeySize+1, err)
	}
	// A long key works (a little below the limit, which a prefix view
	// reaches sooner).
	long := strings.Repeat("k", store.MaxKeySize-64)
	if err := s.Set(ctx, long, []byte("ok")); err != nil {
		t.Fatalf("Set with a %d-byte key: %v", len(long), err)
	}
	if v, err := s.Get(ctx, long); err != nil || string(v) != "ok" {
		t.Fatalf("Get with a %d-byte key = %q, %v", len(long), v, err)
	}
}
