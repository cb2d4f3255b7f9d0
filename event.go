package hcomm

import (
	"context"
	"time"

	"github.com/hcomm-go/hcomm/internal/stream"
)

// An Event marks a point in a Stream's work. Stream.Record (or
// Stream.RecordEvent) places it; the record completes when the stream has
// finished everything enqueued before it. Other streams order themselves
// after it with Stream.WaitEvent, goroutines with Synchronize, and two
// completed events time the work between them with Elapsed.
//
// # Recording again
//
// An event can be recorded many times, on one stream or several. Each
// record is numbered, and the event always refers to its most recent
// record at the time of the question:
//
//   - WaitEvent and Synchronize wait for the record that is the most recent
//     one when they are called. A record issued later does not change what
//     an earlier WaitEvent waits for.
//   - Query reports whether the most recent record has completed.
//   - An event that has never been recorded (since NewEvent or Reset) is
//     not complete: Query reports false, and WaitEvent and Synchronize wait
//     for its first record.
//
// This is the reuse hazard to keep in mind: if a producer records an event
// again before a consumer has called WaitEvent, the consumer waits for the
// new record, not the one it meant, and may wait longer than intended (or
// forever, if the new record depends on the consumer). Conversely, a
// consumer that calls WaitEvent on an event recorded for an earlier
// iteration does not wait at all. Call WaitEvent before the producer
// re-records, or use Reset between iterations so that waits refer to the
// next record.
//
// When a record completes on a stream that has failed, the event carries
// the stream's error: streams waiting on it fail with an error wrapping it,
// and Synchronize returns it.
//
// # Lifetime
//
// An *Event is one event for its whole life: events are not pooled, so a
// released event never becomes a later NewEvent's. Release marks the
// event as finished with; recording a released event completes at once
// with ErrClosed. Events are collected like any value once unreferenced;
// a loop that wants no allocation reuses its events with RecordEvent
// rather than calling Record.
type Event struct {
	e stream.Event
}

// NewEvent returns an event that has not been recorded. The name appears
// in error messages; it may be empty.
func NewEvent(name string) *Event {
	e := &Event{}
	e.e.Init(name)
	return e
}

// Name returns the event's name, or "event#N" for an unnamed event.
func (e *Event) Name() string { return e.e.Name() }

// String returns the event's name, quoted.
func (e *Event) String() string { return e.e.String() }

// Query reports whether the event's most recent record has completed,
// successfully or not. An event never recorded is not complete.
func (e *Event) Query() bool { return e.e.Query() }

// Err returns the error the most recently completed record carries (nil
// if it completed without one, or if none has completed).
func (e *Event) Err() error { return e.e.Err() }

// Synchronize blocks until the record that is the event's most recent one
// when Synchronize is called completes (its first record if it has none),
// and returns the error that record carries. It returns early with an error
// when ctx ends.
func (e *Event) Synchronize(ctx context.Context) error { return e.e.Synchronize(ctx) }

// ErrNotRecorded reports that Event.Elapsed was asked about an event whose
// most recent record has not completed (or that was never recorded).
var ErrNotRecorded = stream.ErrNotRecorded

// Elapsed returns the time from the completion of e's most recent record to
// the completion of end's. Both must be complete (see Query); otherwise it
// returns an error wrapping ErrNotRecorded. The result is negative if end
// completed first.
func (e *Event) Elapsed(end *Event) (time.Duration, error) { return e.e.Elapsed(&end.e) }

// Reset makes the event unrecorded, as if just created: Query reports
// false until it is recorded again, and WaitEvent and Synchronize called
// after Reset wait for the next record. Waits already issued are not
// affected.
func (e *Event) Reset() { e.e.Reset() }

// Release marks the event as finished with. Records and waits still
// pending on it complete normally; a later record completes at once with
// ErrClosed. Release is idempotent.
func (e *Event) Release() { e.e.Release() }
