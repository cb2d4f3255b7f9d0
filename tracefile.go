package hcomm

import "github.com/hcomm-go/hcomm/internal/traceevent"

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
	t.StreamItem(e.Comm, e.Stream, e.Kind, e.Event, e.Start, e.Duration, e.Err)
}

func (t *traceFile) bucketLaunch(e BucketEvent) {
	if t.user != nil && t.user.BucketLaunch != nil {
		t.user.BucketLaunch(e)
	}
	t.Bucket(e.Comm, e.Bucket, e.Bytes, e.Tensors, e.NotReady, e.Flushed, e.At)
}

func (t *traceFile) opEnd(e OpEvent) {
	if t.user != nil && t.user.OpEnd != nil {
		t.user.OpEnd(e)
	}
	t.Collective(traceevent.Op{Comm: e.Comm, Name: e.Op, DType: e.DType.String(), Algo: e.Algo, Rank: e.Rank, Peers: e.Peers,
		Bytes: e.Bytes, Chunks: e.Chunks, Seq: e.Seq, Start: e.Start, Duration: e.Duration, Wait: e.Wait, Err: e.Err})
}

// close finishes the file (none: nothing); later collectives are not
// written.
func (t *traceFile) close() error {
	if t == nil {
		return nil
	}
	return t.Rank.Close()
}
