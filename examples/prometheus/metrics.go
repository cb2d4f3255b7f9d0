package main

import (
	"errors"
	"sync"

	"github.com/hcomm-go/hcomm"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics exports a rank's collectives to Prometheus through an
// hcomm.Observer: counts, bytes, chunks, latency and wait histograms per
// communicator, collective and algorithm, failures by cause, the
// Bucketer's launches, and the time streams spend waiting and working.
// Per-path network statistics come from PathCollector. The core library
// does not import the Prometheus client; this adapter is all the glue a
// program needs.
type Metrics struct {
	ops      *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	chunks   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	wait     *prometheus.HistogramVec
	failures *prometheus.CounterVec
	buckets  *prometheus.CounterVec
	unready  *prometheus.CounterVec
	streams  *prometheus.HistogramVec

	// The children of the vectors per (comm, op, algo), looked up once:
	// With(labels) builds a map on every call, which an Observer running
	// inside every collective should not.
	mu    sync.Mutex
	cache map[opKey]*opMetrics
}

type opKey struct{ comm, op, algo string }

type opMetrics struct {
	ops, bytes, chunks prometheus.Counter
	latency, wait      prometheus.Observer
}

// latencyBuckets span a small collective on shared memory (a few µs) to a
// large one across hosts (seconds).
var latencyBuckets = prometheus.ExponentialBuckets(2e-6, 4, 12)

// NewMetrics returns the metrics, not yet registered (Register): a
// program makes them before Init, to pass the Observer in hcomm.Config,
// and registers them once it knows its rank.
func NewMetrics() *Metrics {
	labels := []string{"comm", "op", "algo"}
	m := &Metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hcomm_collectives_total", Help: "Collectives completed (successfully or not)."}, labels),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hcomm_collective_bytes_total", Help: "Bytes of the collectives' buffers (the larger of input and output)."}, labels),
		chunks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hcomm_collective_chunks_total", Help: "Messages (chunks) this rank sent and received in collectives."}, labels),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hcomm_collective_duration_seconds", Help: "How long collectives took.", Buckets: latencyBuckets}, labels),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hcomm_collective_wait_seconds", Help: "How long a collective ran before the first message from a peer arrived.",
			Buckets: latencyBuckets}, labels),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hcomm_collective_failures_total", Help: "Collectives that returned an error, by cause."}, []string{"comm", "op", "cause"}),
		buckets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hcomm_bucket_launches_total", Help: "Bucketer launches, by how they were triggered."}, []string{"comm", "by"}),
		unready: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hcomm_bucket_unready_tensors_total", Help: "Tensors launched before they were ready (they contributed zeros)."}, []string{"comm"}),
		streams: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hcomm_stream_seconds", Help: "What streams spent their time on: waits for events (kind=wait) and work (kind=AllReduce, …, Go).",
			Buckets: latencyBuckets}, []string{"comm", "stream", "kind"}),
		cache: map[opKey]*opMetrics{},
	}
	return m
}

// Register registers the metrics with reg, adding labels (for example the
// rank) to every series. Metrics may be registered with several registries.
func (m *Metrics) Register(reg prometheus.Registerer, labels prometheus.Labels) error {
	reg = prometheus.WrapRegistererWith(labels, reg)
	for _, c := range []prometheus.Collector{m.ops, m.bytes, m.chunks, m.latency, m.wait, m.failures, m.buckets, m.unready, m.streams} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Observer returns an hcomm.Observer feeding m, calling next's funcs too
// (next may be nil).
func (m *Metrics) Observer(next *hcomm.Observer) *hcomm.Observer {
	o := &hcomm.Observer{OpEnd: m.opEnd, BucketLaunch: m.bucketLaunch, Stream: m.stream}
	if next != nil {
		o.OpStart = next.OpStart
		if f := next.Stream; f != nil {
			o.Stream = func(e hcomm.StreamEvent) { m.stream(e); f(e) }
		}
		if f := next.OpEnd; f != nil {
			o.OpEnd = func(e hcomm.OpEvent) { m.opEnd(e); f(e) }
		}
		if f := next.BucketLaunch; f != nil {
			o.BucketLaunch = func(e hcomm.BucketEvent) { m.bucketLaunch(e); f(e) }
		}
	}
	return o
}

func (m *Metrics) of(e *hcomm.OpEvent) *opMetrics {
	k := opKey{e.Comm, e.Op, e.Algo}
	m.mu.Lock()
	defer m.mu.Unlock()
	om := m.cache[k]
	if om == nil {
		l := prometheus.Labels{"comm": k.comm, "op": k.op, "algo": k.algo}
		om = &opMetrics{ops: m.ops.With(l), bytes: m.bytes.With(l), chunks: m.chunks.With(l),
			latency: m.latency.With(l), wait: m.wait.With(l)}
		m.cache[k] = om
	}
	return om
}

func (m *Metrics) opEnd(e hcomm.OpEvent) {
	om := m.of(&e)
	om.ops.Inc()
	om.bytes.Add(float64(e.Bytes))
	om.chunks.Add(float64(e.Chunks))
	om.latency.Observe(e.Duration.Seconds())
	om.wait.Observe(e.Wait.Seconds())
	if e.Err != nil {
		m.failures.WithLabelValues(e.Comm, e.Op, cause(e.Err)).Inc()
	}
}

// cause names the class of a collective's error, a label with few values.
func cause(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{hcomm.ErrInvalidArgument, "invalid_argument"},
		{hcomm.ErrMismatch, "mismatch"},
		{hcomm.ErrPeerLost, "peer_lost"},
		{hcomm.ErrTimeout, "timeout"},
		{hcomm.ErrAborted, "aborted"},
		{hcomm.ErrClosed, "closed"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "other"
}

func (m *Metrics) bucketLaunch(e hcomm.BucketEvent) {
	by := "ready"
	if e.Flushed {
		by = "flush"
	}
	m.buckets.WithLabelValues(e.Comm, by).Inc()
	if e.NotReady > 0 {
		m.unready.WithLabelValues(e.Comm).Add(float64(e.NotReady))
	}
}

// stream records a stream's waits and work (records take no time).
func (m *Metrics) stream(e hcomm.StreamEvent) {
	if e.Kind == "record" {
		return
	}
	m.streams.WithLabelValues(e.Comm, e.Stream, e.Kind).Observe(e.Duration.Seconds())
}
