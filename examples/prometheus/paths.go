package main

import (
	"strconv"

	"github.com/hcomm-go/hcomm"
	"github.com/prometheus/client_golang/prometheus"
)

// PathCollector exports the network paths of a communicator
// (hcomm.Comm.NetPaths) as series labelled by communicator, peer and
// path (and the path's addresses), read when Prometheus scrapes rather than pushed through the
// Observer: bytes sent and received per path, the estimated rate, the
// share of the last striped message, whether the path is up, the kernel's
// round-trip time and retransmitted segments.
type PathCollector struct {
	c    *hcomm.Comm
	name string
}

// NewPathCollector returns a collector of c's paths, labelled comm=name.
// Register it after Init; a communicator whose peers are not reached over
// TCP adds no series.
func NewPathCollector(c *hcomm.Comm, name string) *PathCollector {
	return &PathCollector{c: c, name: name}
}

var pathLabels = []string{"comm", "peer", "path", "local", "remote"}

var (
	pathSent     = prometheus.NewDesc("hcomm_path_sent_bytes_total", "Payload bytes this rank sent to the peer on the path.", pathLabels, nil)
	pathReceived = prometheus.NewDesc("hcomm_path_received_bytes_total", "Payload bytes this rank received from the peer on the path.", pathLabels, nil)
	pathRate     = prometheus.NewDesc("hcomm_path_rate_bytes_per_second", "Estimated throughput of the path (link speed at first, measured sends afterwards).", pathLabels, nil)
	pathShare    = prometheus.NewDesc("hcomm_path_share", "Fraction of the last striped message this rank sent on the path.", pathLabels, nil)
	pathUp       = prometheus.NewDesc("hcomm_path_up", "1 while the path carries traffic, 0 once it was dropped or retired after a stall.", pathLabels, nil)
	pathRTT      = prometheus.NewDesc("hcomm_path_rtt_seconds", "The kernel's smoothed round-trip time on the path (0 where unavailable).", pathLabels, nil)
	pathRetrans  = prometheus.NewDesc("hcomm_path_retransmits_total", "TCP segments the kernel retransmitted on the path.", pathLabels, nil)
)

// Describe implements prometheus.Collector.
func (pc *PathCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{pathSent, pathReceived, pathRate, pathShare, pathUp, pathRTT, pathRetrans} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (pc *PathCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range pc.c.NetPaths() {
		l := []string{pc.name, strconv.Itoa(p.Peer), strconv.Itoa(p.Path), p.Local, p.Remote}
		up := 0.0
		if p.Up && !p.Retired {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(pathSent, prometheus.CounterValue, float64(p.Sent), l...)
		ch <- prometheus.MustNewConstMetric(pathReceived, prometheus.CounterValue, float64(p.Received), l...)
		ch <- prometheus.MustNewConstMetric(pathRate, prometheus.GaugeValue, p.Rate, l...)
		ch <- prometheus.MustNewConstMetric(pathShare, prometheus.GaugeValue, p.Share, l...)
		ch <- prometheus.MustNewConstMetric(pathUp, prometheus.GaugeValue, up, l...)
		ch <- prometheus.MustNewConstMetric(pathRTT, prometheus.GaugeValue, p.RTT.Seconds(), l...)
		ch <- prometheus.MustNewConstMetric(pathRetrans, prometheus.CounterValue, float64(p.Retrans), l...)
	}
}
