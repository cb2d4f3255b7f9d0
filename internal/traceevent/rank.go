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
