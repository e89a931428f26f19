package corednsmetrics

import (
	"net/netip"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// ServerLabel is the server label of the series of a listen address, as
// CoreDNS writes a server block's address: "dns://169.254.20.10:53".
func ServerLabel(a netip.AddrPort) string { return "dns://" + a.String() }

// View is the view label's value: nodecache has no views.
const View = ""

// ProxyName is the proxy_name label of the proxy series: the forward plugin.
const ProxyName = "forward"

// The plugin label values: the CoreDNS plugin that does a job.
const (
	PluginKubernetes = "kubernetes"
	PluginCache      = "cache"
	PluginForward    = "forward"
	PluginPrometheus = "prometheus"
	PluginAutopath   = "autopath"
)

// TimeBuckets are CoreDNS's plugin.TimeBuckets: 0.25 ms to 8 s.
func TimeBuckets() []float64 { return prometheus.ExponentialBuckets(0.00025, 2, 16) }

// SizeBuckets are the buckets of CoreDNS's request and response size
// histograms.
func SizeBuckets() []float64 {
	return []float64{0, 100, 200, 300, 400, 511, 1023, 2047, 4095, 8291, 16e3, 32e3, 48e3, 64e3}
}

// Types are the qtypes CoreDNS gives a type label of their own
// (plugin/metrics/vars/monitor.go); the rest count as "other".
func Types() []uint16 {
	return []uint16{dns.TypeAAAA, dns.TypeA, dns.TypeCNAME, dns.TypeDNSKEY, dns.TypeDS, dns.TypeMX,
		dns.TypeNSEC3, dns.TypeNSEC, dns.TypeNS, dns.TypePTR, dns.TypeRRSIG, dns.TypeSOA, dns.TypeSRV, dns.TypeTXT,
		dns.TypeHTTPS, dns.TypeSVCB, dns.TypeIXFR, dns.TypeAXFR, dns.TypeANY}
}

// OtherType is the type label of a qtype not in Types.
const OtherType = "other"
