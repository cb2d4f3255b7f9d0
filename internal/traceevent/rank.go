package traceevent

import (
	"os"
	"strconv"
	"sync"
	"time"
)

// Rank is one rank's trace-event file (HCOMM_TRACE): process = the rank,
// one thread per name (a communicator, a stream), named the first time it
// is used. It is safe for concurrent use; after Close it writes nothing.
type Rank struct {
	mu   sync.Mutex
	w    *Writer // nil once closed
	pid  int
	tids map[string]int
}

// CreateRank creates rank's file, named by pattern (RankFile).
func CreateRank(pattern string, rank int) (*Rank, error) {
	f, err := os.Create(RankFile(pattern, rank))
	if err != nil {
		return nil, err
	}
	r := &Rank{w: NewWriter(f), pid: rank, tids: map[string]int{}}
	r.w.Process(rank, "rank "+strconv.Itoa(rank))
	return r, nil
}

// thread returns the thread named name, naming it the first time. r.mu
// is held.
func (r *Rank) thread(name string) int {
	tid, ok := r.tids[name]
	if !ok {
		tid = len(r.tids)
		r.tids[name] = tid
		r.w.Thread(r.pid, tid, name)
	}
	return tid
}

// Slice writes a slice on the thread named thread.
func (r *Rank) Slice(thread, name, cat string, start time.Time, d time.Duration, args map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil {
		r.w.Slice(r.pid, r.thread(thread), name, cat, start, d, args)
	}
}

// Instant writes an instant on the thread named thread.
func (r *Rank) Instant(thread, name, cat string, at time.Time, args map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil {
		r.w.Instant(r.pid, r.thread(thread), name, cat, at, args)
	}
}

// Close finishes the file; later events are not written.
func (r *Rank) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		return nil
	}
	err := r.w.Close()
	r.w = nil
	return err
}

// Op is one collective as a rank's file records it.
type Op struct {
	Comm, Name, DType, Algo    string
	Rank, Peers, Bytes, Chunks int
	Seq                        uint64
	Start                      time.Time
	Duration, Wait             time.Duration
	Err                        error
}

// Collective writes o as a slice on its communicator's thread ("comm
// <id>"), its description as args.
func (r *Rank) Collective(o Op) {
	args := map[string]any{"comm": o.Comm, "rank": o.Rank, "peers": o.Peers, "seq": o.Seq,
		"dtype": o.DType, "bytes": o.Bytes, "algo": o.Algo, "chunks": o.Chunks,
		"wait_us": float64(o.Wait) / float64(time.Microsecond)}
	if o.Err != nil {
		args["error"] = o.Err.Error()
	}
	r.Slice("comm "+o.Comm, o.Name, "collective", o.Start, o.Duration, args)
}

// StreamItem writes what a stream of communicator comm did on the
// stream's own thread ("stream <name>"): a record (kind "record") as an
// instant, a wait ("wait") or an item of work (its name) as a slice.
func (r *Rank) StreamItem(comm, stream, kind, event string, start time.Time, d time.Duration, err error) {
	args := map[string]any{"comm": comm, "stream": stream}
	if event != "" {
		args["event"] = event
	}
	if err != nil {
		args["error"] = err.Error()
	}
	thread := "stream " + stream
	switch kind {
	case "record":
		r.Instant(thread, "record "+event, "stream", start, args)
	case "wait":
		r.Slice(thread, "wait "+event, "stream", start, d, args)
	default:
		r.Slice(thread, kind, "stream", start, d, args)
	}
}

// Bucket writes a Bucketer's launch of a bucket as an instant on its
// communicator's thread.
func (r *Rank) Bucket(comm string, bucket, bytes, tensors, notReady int, flushed bool, at time.Time) {
	args := map[string]any{"comm": comm, "bucket": bucket, "bytes": bytes, "tensors": tensors,
		"not_ready": notReady, "flushed": flushed}
	r.Instant("comm "+comm, "bucket "+strconv.Itoa(bucket), "bucket", at, args)
}
