package tcp

import (
	"fmt"
)

// Replay of a pair's lead stream (the first path's connection 0: small
// messages and the first stripes of large ones).
//
// A small message is gone from the sender once the kernel took it: Send
// returns, and the caller reuses its buffer. If the lead's path then stops,
// the bytes the peer's host had not acknowledged exist nowhere else. To
// move the lead stream onto a surviving path (a wire.FrameLead carrying
// the resume offset and the bytes from there on), the sender keeps a copy
// of what it wrote on the lead that may still be unacknowledged: a
// leadLog, a ring of fixed size allocated once per pair, so the copy costs
// a memmove and never an allocation. Bytes the peer's host acknowledged
// (TCP_INFO bytes_acked) are trimmed away when room is needed; a frame too
// large for the ring is not copied, and its sender instead waits for its
// acknowledgement before Send returns, as it already does for the stripes
// on other paths (after which nothing before it needs replaying: reset).
//
// The receiver joins the old stream and the replay where they meet (see
// resume): bytes it read from the old stream past the resume offset are
// skipped in the replay, and bytes the peer's host acknowledged but this
// rank has not read yet are still in its socket, where it reads them.

// leadLogSize is the size of a pair's replay ring: the unacknowledged small
// frames a lead may hold before a Send waits for acknowledgements. A
// schedule leaves at most a few small messages in flight per direction, so
// waits are rare.
const leadLogSize = 256 << 10

// leadCopyMax is the largest frame (header included) copied into the ring;
// larger ones are waited for instead.
const leadCopyMax = leadLogSize / 4

// leadLog holds a copy of the stream bytes [base, end) written on a lead
// connection, in a ring: stream byte o is at buf[o%len(buf)].
type leadLog struct {
	buf       []byte
	base, end uint64
}

func newLeadLog(size int) *leadLog {
	return &leadLog{buf: make([]byte, size)}
}

// held returns how many bytes the log holds.
func (l *leadLog) held() uint64 { return l.end - l.base }

// fits reports whether n more bytes fit without dropping any held.
func (l *leadLog) fits(n int) bool { return l.held()+uint64(n) <= uint64(len(l.buf)) }

// trim drops the bytes before stream offset acked, which the peer's host
// acknowledged.
func (l *leadLog) trim(acked uint64) {
	if acked > l.base {
		l.base = min(acked, l.end)
	}
}

// add appends b, the next bytes written on the stream. The caller made
// room (fits).
func (l *leadLog) add(b []byte) {
	size := uint64(len(l.buf))
	for len(b) > 0 {
		at := l.end % size
		k := copy(l.buf[at:], b)
		b = b[k:]
		l.end += uint64(k)
	}
	if l.end-l.base > size {
		l.base = l.end - size
	}
}

// reset empties the log at stream offset at: everything written before it
// is acknowledged (or was never copied and is acknowledged).
func (l *leadLog) reset(at uint64) { l.base, l.end = at, at }

// from returns the held bytes from stream offset off to the end, as at most
// two slices of the ring (valid until the next add), or an error if off is
// outside what the log holds.
func (l *leadLog) from(off uint64) (a, b []byte, err error) {
	if off < l.base || off > l.end {
		return nil, nil, fmt.Errorf("tcp: replay from byte %d of the lead stream, the copy holds bytes %d to %d", off, l.base, l.end)
	}
	size := uint64(len(l.buf))
	if off == l.end {
		return nil, nil, nil
	}
	s, e := off%size, l.end%size
	if s < e {
		return l.buf[s:e], nil, nil
	}
	return l.buf[s:], l.buf[:e], nil
}

// resume says how a receiver joins an old lead stream to the replay a lead
// frame brings: read is how many bytes of the old stream it has consumed,
// held how many more its socket still holds (readable though the path
// stopped), at and n the frame's resume offset and replay length. It
// returns how many more bytes to take from the old stream before the
// replay, and how many of the replay's first bytes to skip (those it
// already has). A frame that cannot be joined (it resumes past what this
// rank has, or the replay ends before what it already read) is the peer
// breaking the protocol.
func resume(read, held, at, n uint64) (take, skip uint64, err error) {
	if at > read && at-read > held {
		return 0, 0, fmt.Errorf("lead stream resumed at byte %d; this rank has %d bytes of the old stream: %w", at, read+held, errProtocol)
	}
	if read > at && read-at > n {
		return 0, 0, fmt.Errorf("lead stream resumed at byte %d with %d bytes; this rank already read %d: %w", at, n, read, errProtocol)
	}
	join := max(read, at)
	return join - read, join - at, nil
}
