package notice

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/memkv"
)

func newMemKV() *memkv.KV { return memkv.New() }

func TestRoundTrip(t *testing.T) {
	for _, n := range []Note{
		{From: 0, Lost: -1, Text: "mismatch"},
		{From: 3, Lost: 2, Text: "rank 2 failed: connection reset\nby peer"},
		{From: 1, Lost: 0, Text: ""},
	} {
		got, err := Decode(n.Encode(), 4)
		if err != nil || got != n {
			t.Errorf("round trip of %+v: %+v, %v", n, got, err)
		}
	}
	long := Note{From: 1, Lost: 1, Text: strings.Repeat("x", MaxText+5)}
	if got, err := Decode(long.Encode(), 2); err != nil || len(got.Text) != MaxText {
		t.Errorf("long text: %d bytes, %v", len(got.Text), err)
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, b := range []string{
		"", "hcomm-note/1 0 -1", "hcomm-note/2 0 -1\n", "hcomm-note/1 4 -1\n", "hcomm-note/1 0 -2\n",
		"hcomm-note/1 0 4\n", "hcomm-note/1 +1 0\n", "hcomm-note/1 01 0\n", "hcomm-note/1 0  0\n",
		"hcomm-note/1 x 0\n", "rank 3 failed",
	} {
		if _, err := Decode([]byte(b), 4); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode(%q) = %v, want ErrMalformed", b, err)
		}
	}
}

// TestFirstPublisherIsTheNotice checks that the communicator's notice is
// the first note published, that every rank's note is kept, and that
// watchers waiting before the first note see it.
func TestFirstPublisherIsTheNotice(t *testing.T) {
	kv := newMemKV()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := make(chan Note, 3)
	for range 3 {
		go func() {
			n, err := Watch(ctx, kv, "world", 4)
			if err != nil {
				t.Error(err)
			}
			got <- n
		}()
	}
	first := Note{From: 1, Lost: 2, Text: "lost rank 2"}
	if err := Publish(ctx, kv, "world", 11, first); err != nil {
		t.Fatal(err)
	}
	if err := Publish(ctx, kv, "world", 13, Note{From: 3, Lost: 1, Text: "lost rank 1"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if n := <-got; n != first {
			t.Errorf("watcher saw %+v, want %+v", n, first)
		}
	}
	if n, err := Watch(ctx, kv, "world", 4); err != nil || n != first {
		t.Errorf("notice after two publishers: %+v, %v", n, err)
	}
	if n, err := Lookup(ctx, kv, "world", 13, 4); err != nil || n.From != 3 || n.Lost != 1 {
		t.Errorf("Lookup of the second publisher: %+v, %v", n, err)
	}
	short, cancel2 := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel2()
	if _, err := Lookup(short, kv, "world", 12, 4); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lookup of a rank that published nothing: %v", err)
	}
	if _, err := Watch(short, kv, "other", 4); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Watch of another communicator: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add((&Note{From: 1, Lost: 2, Text: "lost"}).Encode(), 4)
	f.Add([]byte("hcomm-note/1 0 -1\n"), 1)
	f.Fuzz(func(t *testing.T, b []byte, size int) {
		n, err := Decode(b, size)
		if err != nil {
			return
		}
		if n.From < 0 || n.From >= size || n.Lost < -1 || n.Lost >= size || len(n.Text) > MaxText {
			t.Fatalf("accepted %+v for size %d", n, size)
		}
		if out := n.Encode(); !bytes.Equal(out, b) {
			t.Fatalf("re-encoding differs:\n in %q\nout %q", b, out)
		}
	})
}
