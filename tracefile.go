package hcomm

import (
	"strconv"
	"time"

	"github.com/hcomm-go/hcomm/internal/traceevent"
)

// traceFile writes a rank's collectives to a trace-event file
// (HCOMM_TRACE, a traceevent.Rank), which Perfetto and chrome://tracing
// open and `hcomm trace merge` joins across ranks: process = the world
// rank, one thread per communicator, one slice per collective with its
// description as args, and one thread per stream with its records, waits
// and work. It observes through an Observer, after the program's own.
type traceFile struct {
	*traceevent.Rank
	user *Observer
}

// traceFileName is pattern for rank (traceevent.RankFile).
func traceFileName(pattern string, rank int) string { return traceevent.RankFile(pattern, rank) }

// openTrace starts world rank rank's trace file; user is the program's
// Observer (nil: none).
func openTrace(pattern string, rank int, user *Observer) (*traceFile, error) {
	r, err := traceevent.CreateRank(pattern, rank)
	if err != nil {
		return nil, invalid("HCOMM_TRACE: %v", err)
	}
	return &traceFile{r, user}, nil
}

// observer returns the Observer that feeds the file and the program's.
func (t *traceFile) observer() *Observer {
	o := &Observer{OpEnd: t.opEnd, BucketLaunch: t.bucketLaunch, Stream: t.stream}
	if t.user != nil {
		o.OpStart = t.user.OpStart
	}
	return o
}

// stream writes what a stream did on the stream's own thread: records as
// instants, waits and work as slices.
func (t *traceFile) stream(e StreamEvent) {
	if t.user != nil && t.user.Stream != nil {
		t.user.Stream(e)
	}
	args := map[string]any{"comm": e.Comm, "stream": e.Stream}
	if e.Event != "" {
		args["event"] = e.Event
	}
	if e.Err != nil {
		args["error"] = e.Err.Error()
	}
	thread := "stream " + e.Stream
	switch e.Kind {
	case "record":
		t.Instant(thread, "record "+e.Event, "stream", e.Start, args)
	case "wait":
		t.Slice(thread, "wait "+e.Event, "stream", e.Start, e.Duration, args)
	default:
		t.Slice(thread, e.Kind, "stream", e.Start, e.Duration, args)
	}
}

func (t *traceFile) bucketLaunch(e BucketEvent) {
	if t.user != nil && t.user.BucketLaunch != nil {
		t.user.BucketLaunch(e)
	}
	args := map[string]any{"comm": e.Comm, "bucket": e.Bucket, "bytes": e.Bytes, "tensors": e.Tensors,
		"not_ready": e.NotReady, "flushed": e.Flushed}
	t.Instant("comm "+e.Comm, "bucket "+strconv.Itoa(e.Bucket), "bucket", e.At, args)
}

func (t *traceFile) opEnd(e OpEvent) {
	if t.user != nil && t.user.OpEnd != nil {
		t.user.OpEnd(e)
	}
	args := map[string]any{"comm": e.Comm, "rank": e.Rank, "peers": e.Peers, "seq": e.Seq,
		"dtype": e.DType.String(), "bytes": e.Bytes, "algo": e.Algo, "chunks": e.Chunks,
		"wait_us": float64(e.Wait) / float64(time.Microsecond)}
	if e.Err != nil {
		args["error"] = e.Err.Error()
	}
	t.Slice("comm "+e.Comm, e.Op, "collective", e.Start, e.Duration, args)
}

// close finishes the file (none: nothing); later collectives are not
// written.
func (t *traceFile) close() error {
	if t == nil {
		return nil
	}
	return t.Rank.Close()
}
