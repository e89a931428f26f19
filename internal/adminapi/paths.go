package adminapi

// The admin API's paths. Each takes the query parameters named beside it.
const (
	PathStatus     = "/v1/status"      // GET
	PathQuery      = "/v1/query"       // GET name=NAME type=TYPE
	PathReload     = "/v1/reload"      // POST
	PathUpstreams  = "/v1/upstreams"   // GET
	PathCacheStats = "/v1/cache/stats" // GET
	PathCacheDump  = "/v1/cache/dump"  // GET filter=SUFFIX limit=N
	PathCacheFlush = "/v1/cache/flush" // POST exactly one of name=NAME, zone=SUFFIX, all=true
	PathZoneList   = "/v1/zone/list"   // GET namespace=NS
	PathZoneShow   = "/v1/zone/show"   // GET name=NAME
	PathTop        = "/v1/top"         // GET n=N
	PathTail       = "/v1/tail"        // GET pod, namespace, suffix, rcode, min_latency; a stream of JSON lines
	PathPod        = "/v1/pod"         // GET ip=IP or name=NAMESPACE/NAME
)
