package hcomm

import (
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hcomm-go/hcomm/internal/traceevent"
)

// traceFile writes a rank's collectives to a trace-event file
// (HCOMM_TRACE), which Perfetto and chrome://tracing open and `hcomm trace
// merge` joins across ranks: process = the world rank, one thread per
// communicator, one slice per collective with its description as args,
// and one thread per stream with its records, waits and work. It
// observes through an Observer, after the program's own.
type traceFile struct {
	mu   sync.Mutex
	w    *traceevent.Writer // nil once closed
	pid  int
	tids map[string]int // per communicator ("comm ID") and stream ("stream NAME")
	user *Observer
}

// traceFileName is pattern for rank (traceevent.RankFile).
func traceFileName(pattern string, rank int) string { return traceevent.RankFile(pattern, rank) }

// openTrace starts world rank rank's trace file; user is the program's
// Observer (nil: none).
func openTrace(pattern string, rank int, user *Observer) (*traceFile, error) {
	name := traceFileName(pattern, rank)
	f, err := os.Create(name)
	if err != nil {
		return nil, invalid("HCOMM_TRACE: %v", err)
	}
	t := &traceFile{w: traceevent.NewWriter(f), pid: rank, tids: map[string]int{}, user: user}
	t.w.Process(rank, "rank "+strconv.Itoa(rank))
	return t, nil
}

// observer returns the Observer that feeds the file and the program's.
func (t *traceFile) observer() *Observer {
	o := &Observer{OpEnd: t.opEnd, BucketLaunch: t.bucketLaunch, Stream: t.stream}
	if t.user != nil {
		o.OpStart = t.user.OpStart
	}
	return o
}

// tid returns communicator comm's thread, naming it the first time.
// t.mu is held.
func (t *traceFile) tid(comm string) int { return t.thread("comm " + comm) }

// thread returns the thread named name, naming it the first time. t.mu
// is held.
func (t *traceFile) thread(name string) int {
	tid, ok := t.tids[name]
	if !ok {
		tid = len(t.tids)
		t.tids[name] = tid
		t.w.Thread(t.pid, tid, name)
	}
	return tid
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
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w == nil {
		return
	}
	tid := t.thread("stream " + e.Stream)
	switch e.Kind {
	case "record":
		t.w.Instant(t.pid, tid, "record "+e.Event, "stream", e.Start, args)
	case "wait":
		t.w.Slice(t.pid, tid, "wait "+e.Event, "stream", e.Start, e.Duration, args)
	default:
		t.w.Slice(t.pid, tid, e.Kind, "stream", e.Start, e.Duration, args)
	}
}

func (t *traceFile) bucketLaunch(e BucketEvent) {
	if t.user != nil && t.user.BucketLaunch != nil {
		t.user.BucketLaunch(e)
	}
	args := map[string]any{"comm": e.Comm, "bucket": e.Bucket, "bytes": e.Bytes, "tensors": e.Tensors,
		"not_ready": e.NotReady, "flushed": e.Flushed}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w == nil {
		return
	}
	t.w.Instant(t.pid, t.tid(e.Comm), "bucket "+strconv.Itoa(e.Bucket), "bucket", e.At, args)
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
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w == nil {
		return
	}
	t.w.Slice(t.pid, t.tid(e.Comm), e.Op, "collective", e.Start, e.Duration, args)
}

// close finishes the file; later collectives are not written.
func (t *traceFile) close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w == nil {
		return nil
	}
	err := t.w.Close()
	t.w = nil
	return err
}
