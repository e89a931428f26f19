package cli

import (
	"math"
	"testing"
	"time"

	"github.com/nodecache/nodecache/internal/adminapi"
)

func TestTopRates(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := adminapi.Top{Time: t0,
		Clients: []adminapi.ClientRow{
			{IP: "10.244.1.5", Pod: "demo/web-1", Queries: 100, NXDomain: 10, AvgMicros: 100},
			{IP: "10.244.1.6", Queries: 50, AvgMicros: 50},
		},
		Totals: adminapi.Totals{Queries: 150, NXDomain: 10, AvgMicros: 250.0 / 3,
			Rcodes: map[string]uint64{"NOERROR": 140, "NXDOMAIN": 10}, Sources: map[string]uint64{"cache": 150}}}
	cur := adminapi.Top{Time: t0.Add(2 * time.Second),
		Clients: []adminapi.ClientRow{
			{IP: "10.244.1.5", Pod: "demo/web-1", Queries: 120, NXDomain: 30, AvgMicros: 100}, // +20 q, +20 nx
			{IP: "10.244.1.6", Queries: 50, AvgMicros: 50},                                    // idle
			{IP: "10.244.1.7", Pod: "demo/batch", Queries: 40, NXDomain: 0, AvgMicros: 25},    // new: +40
		},
		Totals: adminapi.Totals{Queries: 210, NXDomain: 30, AvgMicros: (150*250.0/3 + 20*100 + 40*25) / 210,
			Rcodes: map[string]uint64{"NOERROR": 180, "NXDOMAIN": 30}, Sources: map[string]uint64{"cache": 190, "zone": 20}}}
	v, err := topRates(prev, cur, 10)
	if err != nil {
		t.Fatal(err)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-6 {
			t.Errorf("%s: got %v, want %v", what, got, want)
		}
	}
	near("qps", v.QPS, 30)
	near("nxdomain/s", v.NXDomainRate, 10)
	near("avg latency", v.AvgMicros, 50) // (20*100 + 40*25) / 60
	near("NOERROR share", v.Rcodes["NOERROR"], 100*40.0/60)
	near("NXDOMAIN share", v.Rcodes["NXDOMAIN"], 100*20.0/60)
	near("zone share", v.Sources["zone"], 100*20.0/60)
	if v.ActiveClients != 2 {
		t.Errorf("active clients: got %d, want 2", v.ActiveClients)
	}
	if len(v.ByQueries) != 2 || v.ByQueries[0].IP != "10.244.1.7" || v.ByQueries[1].IP != "10.244.1.5" {
		t.Fatalf("top by queries: got %+v, want 10.244.1.7 then 10.244.1.5", v.ByQueries)
	}
	near("10.244.1.7 qps", v.ByQueries[0].QPS, 20)
	if len(v.ByNXDomain) != 1 || v.ByNXDomain[0].Pod != "demo/web-1" {
		t.Fatalf("top by nxdomain: got %+v, want only demo/web-1", v.ByNXDomain)
	}
	near("demo/web-1 nxdomain/s", v.ByNXDomain[0].NXDomainRate, 10)

	if v, _ := topRates(prev, cur, 1); len(v.ByQueries) != 1 {
		t.Errorf("n=1: got %d rows, want 1", len(v.ByQueries))
	}
	if _, err := topRates(cur, prev, 10); err == nil {
		t.Errorf("samples in the wrong order: got no error, want one")
	}
	// An agent restart resets counters: the new counts are the delta.
	restarted := cur
	restarted.Time = t0.Add(4 * time.Second)
	restarted.Totals = adminapi.Totals{Queries: 8, AvgMicros: 10}
	restarted.Clients = []adminapi.ClientRow{{IP: "10.244.1.5", Queries: 8, AvgMicros: 10}}
	v, err = topRates(cur, restarted, 10)
	if err != nil {
		t.Fatal(err)
	}
	near("qps after restart", v.QPS, 4)
	near("client qps after restart", v.ByQueries[0].QPS, 4)
}
