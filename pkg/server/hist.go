package server

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// histVec is a histogram vector with a fixed set of cells, indexed like
// lazy's, that takes n observations of one value in one call: a batch of
// replies adds its observations to a cell with one atomic add per bucket
// touched, not one Observe per reply. Its series are those of the
// prometheus.HistogramVec it is made from (name, help, labels, buckets);
// as there, only cells that were observed are exported.
type histVec struct {
	desc   *prometheus.Desc
	bounds []float64 // upper bounds, ascending; +Inf is implicit
	labels func(i int) []string
	cells  []histCell
}

// histCell is one histogram: non-cumulative bucket counts (the last is
// +Inf) and the sum's float64 bits. Its count is the buckets' total, so a
// scrape never sees a count that disagrees with its buckets.
type histCell struct {
	buckets []atomic.Uint64
	sum     atomic.Uint64
}

// newHistVec makes n cells with the series of vec; labels(i) are cell i's
// label values. vec itself is only read for its description, never
// registered.
func newHistVec(vec *prometheus.HistogramVec, n int, labels func(i int) []string) (*histVec, error) {
	h := &histVec{labels: labels, cells: make([]histCell, n)}
	if n == 0 {
		return h, nil
	}
	probe, err := vec.GetMetricWithLabelValues(labels(0)...)
	if err != nil {
		return nil, fmt.Errorf("histogram labels: %w", err)
	}
	m, ok := probe.(prometheus.Metric)
	if !ok {
		return nil, fmt.Errorf("histogram %T is not a prometheus.Metric", probe)
	}
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		return nil, fmt.Errorf("reading histogram buckets: %w", err)
	}
	h.desc = m.Desc()
	for _, b := range d.GetHistogram().GetBucket() {
		h.bounds = append(h.bounds, b.GetUpperBound())
	}
	for i := range h.cells {
		h.cells[i].buckets = make([]atomic.Uint64, len(h.bounds)+1)
	}
	return h, nil
}

// bucket returns the index of the bucket v falls in: the first bound
// not below it, as prometheus counts (le).
func (h *histVec) bucket(v float64) int {
	for i, b := range h.bounds {
		if v <= b {
			return i
		}
	}
	return len(h.bounds)
}

// observeN adds n observations of v to cell i.
func (h *histVec) observeN(i int, v float64, n uint64) {
	c := &h.cells[i]
	c.buckets[h.bucket(v)].Add(n)
	add := v * float64(n)
	for {
		old := c.sum.Load()
		if c.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+add)) {
			return
		}
	}
}

// Describe implements prometheus.Collector.
func (h *histVec) Describe(ch chan<- *prometheus.Desc) {
	if h.desc != nil {
		ch <- h.desc
	}
}

// Collect implements prometheus.Collector: every cell observed at least once.
func (h *histVec) Collect(ch chan<- prometheus.Metric) {
	for i := range h.cells {
		c := &h.cells[i]
		var count uint64
		cum := make(map[float64]uint64, len(h.bounds))
		for j, b := range h.bounds {
			count += c.buckets[j].Load()
			cum[b] = count
		}
		count += c.buckets[len(h.bounds)].Load()
		if count == 0 {
			continue
		}
		m, err := prometheus.NewConstHistogram(h.desc, count, math.Float64frombits(c.sum.Load()), cum, h.labels(i)...)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(h.desc, err)
			continue
		}
		ch <- m
	}
}
