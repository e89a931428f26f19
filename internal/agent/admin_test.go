package agent

import (
	"testing"

	"github.com/nodecache/nodecache/pkg/kubezone"
)

func TestZoneShow(t *testing.T) {
	recs := []kubezone.Record{
		{Name: "web.demo.svc.cluster.local.", Type: "A", Data: "10.96.0.10"},
		{Name: "_http._tcp.web.demo.svc.cluster.local.", Type: "SRV"},
		{Name: "web2.demo.svc.cluster.local.", Type: "A"},
		{Name: "10.0.96.10.in-addr.arpa.", Type: "PTR"},
	}
	tests := []struct {
		name string
		want int
	}{
		{"web.demo", 2},
		{"WEB.demo.svc.cluster.local.", 2},
		{"_http._tcp.web.demo.svc.cluster.local", 1},
		{"10.96.0.10", 1},
		{"demo.svc.cluster.local", 3},
		{"nope.demo", 0},
	}
	for _, tt := range tests {
		if got := zoneShow(recs, tt.name, "cluster.local"); len(got) != tt.want {
			t.Errorf("%s: got %d records, want %d", tt.name, len(got), tt.want)
		}
	}
}
