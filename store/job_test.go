package store

import (
	"errors"
	"sync"
	"testing"
)

// TestJoinJob checks that each rank joins a store once, whichever process
// or handle asks, and that a second job's ranks are told the store is
// reused.
func TestJoinJob(t *testing.T) {
	checkNoLeaks(t)
	ctx := testCtx(t)
	srv := startServer(t, ServerConfig{Token: testToken})
	dir := t.TempDir()
	for _, open := range []func() Store{
		func() Store { return dialTest(t, srv.Addr().String(), testToken) },
		func() Store {
			fs, err := NewFileStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fs.Close() })
			return fs
		},
	} {
		// The first job: four ranks at once, each on its own handle.
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for r := range errs {
			s := open()
			wg.Go(func() { errs[r] = JoinJob(ctx, s, r) })
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d of the first job: %v", r, err)
			}
		}
		// A second job through the same store.
		err := JoinJob(ctx, open(), 2)
		if !errors.Is(err, ErrReused) {
			t.Fatalf("rank 2 of a second job: err = %v, want ErrReused", err)
		}
		t.Logf("second job: %v", err)
	}
}
