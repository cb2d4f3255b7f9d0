package fusion

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"unsafe"

	"github.com/hcomm-go/hcomm"
	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// onLocalRanks runs body on every rank of an n-rank NewLocal
// communicator concurrently, closes them, and fails t with their errors.
func onLocalRanks(t testing.TB, n int, cfg *hcomm.Config, body func(c *hcomm.Comm) error) {
	t.Helper()
	comms, err := hcomm.NewLocal(context.Background(), n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Go(func() {
			defer c.Close()
			errs[c.Rank()] = body(c)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// bytesOf views s as bytes.
func bytesOf[T hcomm.Element](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers (a log
// written by several ranks).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
