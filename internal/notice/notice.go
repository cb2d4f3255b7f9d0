// Package notice carries a communicator's failure notes through the job's
// store, so that every rank learns of a failure, and of its root cause,
// whatever the connections between the ranks.
//
// A rank whose operation fails publishes, before the operation returns, a
// Note under its own key (what it saw: the rank it lost, if any, and the
// error's text) and, if it is the first of the communicator to fail, the
// same note as the communicator's notice. Every rank watches the notice
// (Watch) and aborts its transport when it appears: ranks blocked on a
// connection that will never come, or on a peer that has exited, fail
// within a round trip to the store. A rank that sees a connection drop
// reads the departed peer's note (Lookup) before it blames that peer: a
// peer that exited after its own failure names the rank that actually
// died.
package notice

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// KV is the part of the store the notes travel through.
type KV interface {
	Set(ctx context.Context, key string, value []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	Add(ctx context.Context, key string, delta int64) (int64, error)
}

// Note is what a rank publishes about a communicator's failure.
type Note struct {
	// From is the publishing rank, in the communicator.
	From int
	// Lost is the rank of the communicator whose loss is the root cause,
	// or -1 if the failure is of another kind (mismatch, timeout, abort).
	Lost int
	// Text is the failure's message.
	Text string
}

// MaxText is the longest Text a note carries, in bytes.
const MaxText = 4096

const magic = "hcomm-note/1"

// ErrMalformed is wrapped by the errors of Decode.
var ErrMalformed = errors.New("notice: malformed note")

// Encode returns the encoding of n: a header line "hcomm-note/1 FROM
// LOST" and the text, cut to MaxText bytes.
func (n *Note) Encode() []byte {
	text := n.Text
	if len(text) > MaxText {
		text = text[:MaxText]
	}
	return []byte(fmt.Sprintf("%s %d %d\n%s", magic, n.From, n.Lost, text))
}

// Decode parses an encoded note, checking that the ranks lie in a
// communicator of size ranks.
func Decode(b []byte, size int) (Note, error) {
	if len(b) > len(magic)+48+MaxText {
		return Note{}, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	head, text, ok := strings.Cut(string(b), "\n")
	if !ok {
		return Note{}, fmt.Errorf("%w: no header line", ErrMalformed)
	}
	f := strings.Split(head, " ")
	if len(f) != 3 || f[0] != magic {
		return Note{}, fmt.Errorf("%w: header %q", ErrMalformed, head)
	}
	from, err1 := strconv.Atoi(f[1])
	lost, err2 := strconv.Atoi(f[2])
	switch {
	case err1 != nil || err2 != nil || strconv.Itoa(from) != f[1] || strconv.Itoa(lost) != f[2]:
		return Note{}, fmt.Errorf("%w: header %q", ErrMalformed, head)
	case from < 0 || from >= size || lost < -1 || lost >= size:
		return Note{}, fmt.Errorf("%w: ranks %d and %d in a communicator of %d", ErrMalformed, from, lost, size)
	case len(text) > MaxText:
		return Note{}, fmt.Errorf("%w: %d bytes of text", ErrMalformed, len(text))
	}
	return Note{From: from, Lost: lost, Text: text}, nil
}

// rankKey is where the rank of world rank world tells why communicator
// id failed.
func rankKey(id string, world int) string {
	return "hcomm/failed/" + id + "/" + strconv.Itoa(world)
}

func noticeKey(id string) string { return "hcomm/notice/" + id }
func countKey(id string) string  { return "hcomm/notice/" + id + "/n" }

// Publish stores n as the note of the rank of world rank world and, if no
// rank of communicator id published before, as the communicator's notice.
// It returns when both are stored or ctx ends.
func Publish(ctx context.Context, kv KV, id string, world int, n Note) error {
	b := n.Encode()
	if err := kv.Set(ctx, rankKey(id, world), b); err != nil {
		return err
	}
	k, err := kv.Add(ctx, countKey(id), 1)
	if err != nil || k != 1 {
		return err
	}
	return kv.Set(ctx, noticeKey(id), b)
}

// Lookup returns the note of the rank of world rank world, waiting for it
// until ctx ends.
func Lookup(ctx context.Context, kv KV, id string, world, size int) (Note, error) {
	b, err := kv.Get(ctx, rankKey(id, world))
	if err != nil {
		return Note{}, err
	}
	return Decode(b, size)
}

// Watch waits for communicator id's notice and returns it; it returns an
// error when ctx ends or the store fails first.
func Watch(ctx context.Context, kv KV, id string, size int) (Note, error) {
	b, err := kv.Get(ctx, noticeKey(id))
	if err != nil {
		return Note{}, err
	}
	return Decode(b, size)
}
