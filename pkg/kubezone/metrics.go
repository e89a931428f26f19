package kubezone

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the zone; registered on the Registerer given to New.
type metrics struct {
	objects     *prometheus.GaugeVec     // kind
	synced      prometheus.Gauge         //
	source      *prometheus.GaugeVec     // source
	programming *prometheus.HistogramVec // from: event | write
	snapWrites  *prometheus.CounterVec   // result: ok | error
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nodecache_zone_objects",
			Help: "Objects the cluster zone is built from, by kind (namespaces, services, endpointslices, endpoints, pods)."},
			[]string{"kind"}),
		synced: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nodecache_zone_synced",
			Help: "1 once the informers have synced and the zone holds their objects, else 0."}),
		source: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nodecache_zone_source",
			Help: "1 for the current source of the zone's data (none, snapshot, api), 0 for the others."},
			[]string{"source"}),
		programming: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nodecache_zone_programming_duration_seconds",
			Help: "Time from an object change to the zone answering it: from=event since the informer delivered " +
				"it, from=write (best effort, second resolution) since the object's last write time.",
			Buckets: []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60},
		}, []string{"from"}),
		snapWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodecache_zone_snapshot_writes_total",
			Help: "Snapshot writes by result (ok, error)."}, []string{"result"}),
	}
	for _, k := range []string{"namespaces", "services", "endpointslices", "endpoints", "pods"} {
		m.objects.WithLabelValues(k)
	}
	for _, r := range []string{"ok", "error"} {
		m.snapWrites.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.objects, m.synced, m.source, m.programming, m.snapWrites} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering zone metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) setSource(s string) {
	for _, v := range []string{SourceNone, SourceSnapshot, SourceAPI} {
		val := 0.0
		if v == s {
			val = 1
		}
		m.source.WithLabelValues(v).Set(val)
	}
}
