package hcomm

import (
	"log/slog"
	"time"

	"github.com/hcomm-go/hcomm/internal/callpath"
	"github.com/hcomm-go/hcomm/internal/fusion"
	"github.com/hcomm-go/hcomm/internal/stream"
)

// An Observer is told about a communicator's collectives as they start and
// end (Config.Observer). Every field may be nil. The funcs run on the
// goroutine making the call, while the communicator holds its lock for
// the call: they must return quickly and must not call the communicator.
// A communicator without an Observer pays one branch per collective.
type Observer struct {
	// OpStart is called when a collective starts, after its algorithm is
	// chosen; Duration and Err are zero. A call on registered memory
	// (Comm.Alloc) that may take the zero-copy path is reported once the
	// ranks have agreed whether it does (for a non-root of Gather or
	// Reduce, at the root's verdict, near the call's end); its Start is
	// still when the call began.
	OpStart func(OpEvent)
	// OpEnd is called when it returns, with its Duration and error.
	OpEnd func(OpEvent)
	// Stream is called as a stream made by the communicator's
	// NewStream records an event, waits for one, or runs an item of work
	// (on the stream's goroutine; free-standing streams report nothing).
	Stream func(StreamEvent)
	// BucketLaunch is called when a Bucketer (package hcomm/fusion) of
	// the communicator launches a bucket's reduction (on the goroutine
	// that triggered it, under the Bucketer's lock).
	BucketLaunch func(BucketEvent)
}

// A BucketEvent describes the launch of one bucket by a Bucketer
// (package hcomm/fusion).
type BucketEvent struct {
	Comm     string // the communicator's identity
	Rank     int
	Bucket   int       // the bucket's index (fusion.BucketInfo.Index)
	Bytes    int       // the bucket's size
	Tensors  int       // tensors in the bucket
	NotReady int       // of which not ready (they contribute zeros)
	Flushed  bool      // launched by Flush or Wait rather than by readiness or the window
	At       time.Time // when it was launched
}

// A StreamEvent describes what a stream did, for an Observer.
type StreamEvent struct {
	Comm   string // the identity of the communicator that made the stream
	Rank   int
	Stream string // the stream's name
	// Kind is "record" (an event recorded), "wait" (a wait for an
	// event), or the work the stream ran: the collective's name
	// ("AllReduce", …, "Send") or "Go".
	Kind     string
	Event    string // the event recorded or awaited; "" for work
	Start    time.Time
	Duration time.Duration // of a wait or of the work; 0 for a record
	Err      error         // the item's error (a record's: the stream's sticky error it carries)
}

// An OpEvent describes one collective for an Observer.
type OpEvent struct {
	Comm     string // the communicator's identity ("world", or a Split's)
	Rank     int    // this rank in the communicator
	Peers    int    // the ranks taking part (the communicator's size)
	Seq      uint64 // the collective's sequence number in the communicator
	Op       string // "AllReduce", "Broadcast", …
	DType    DType
	Bytes    int    // the larger of this rank's input and output, in bytes
	Algo     string // the algorithm that runs: the planner's ("ring", "rd", …), or "zero-copy" for a call on registered memory that takes that path (Comm.Alloc)
	Chunks   int    // messages this rank sends and receives (each cut to at most the chunk size)
	Start    time.Time
	Duration time.Duration // OpEnd only
	// Wait (OpEnd only) is how long the call ran before the first message
	// from a peer arrived: mostly the time spent waiting for the peers to
	// reach the collective. It is 0 when the rank received nothing, and
	// the rest of Duration is moving and reducing data. A group call
	// (Algo "shm-slots") is one step: it publishes this rank's
	// contribution, of at most a few KiB, and waits until every peer's
	// is in its slot; its Wait is the whole Duration, an upper bound that
	// includes that step's copy and reduction.
	Wait time.Duration
	Err  error // OpEnd only: what the call returns
}

// observeWith tells o (nil: none) of the collectives of c's call path.
func (c *Comm) observeWith(o *Observer) {
	if o == nil {
		return
	}
	ev := func(e *callpath.Op) OpEvent {
		return OpEvent{Comm: c.id, Rank: c.rank, Peers: c.size, Seq: e.Seq, Op: e.Name, DType: DType(e.DType), Bytes: e.Bytes,
			Algo: e.Algo, Chunks: e.Chunks, Start: e.Start, Duration: e.Duration, Wait: e.Wait, Err: e.Err}
	}
	c.path.Start = func(e *callpath.Op) {
		if o.OpStart != nil {
			o.OpStart(ev(e))
		}
	}
	c.path.End = func(e *callpath.Op) {
		if o.OpEnd != nil {
			o.OpEnd(ev(e))
		}
	}
}

// streamHook returns the hook that tells f what stream s does.
func (c *Comm) streamHook(f func(StreamEvent), s *stream.Stream[collArgs]) stream.Hook {
	return func(what, event string, start time.Time, d time.Duration, err error) {
		f(StreamEvent{Comm: c.id, Rank: c.rank, Stream: s.Name(), Kind: what, Event: event,
			Start: start, Duration: d, Err: err})
	}
}

// The Bucketer (hcomm/fusion) sees inside the root's values through
// fusion.Root, and nothing else does.
func init() {
	fusion.Root.Event = func(e any) *stream.Event { return &e.(*Event).e }
	fusion.Root.Stream = func(s any) fusion.Stream { return &s.(*Stream).s }
	fusion.Root.Log = func(c any) *slog.Logger { return c.(*Comm).set.Log }
	fusion.Root.Launched = func(c any, l fusion.Launch) {
		if c := c.(*Comm); c.set.observer != nil && c.set.observer.BucketLaunch != nil {
			c.set.observer.BucketLaunch(BucketEvent{Comm: c.id, Rank: c.rank, Bucket: l.Bucket, Bytes: l.Bytes,
				Tensors: l.Tensors, NotReady: l.NotReady, Flushed: l.Flushed, At: l.At})
		}
	}
}
