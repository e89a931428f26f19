// Package kubezone answers the cluster domain (cluster.local.) from the
// node's own watches of the API server, following docs/dns-behaviour.md:
// service A/AAAA/CNAME/SRV, endpoint and pod names, PTRs of ClusterIPs and
// ready endpoints, dns-version, the apex SOA/NS, NODATA for empty
// non-terminals and NXDOMAIN with the SOA for everything else.
//
// # Sources
//
// Run watches Services, EndpointSlices (discovery.k8s.io/v1) and Namespaces
// cluster-wide, and Pods of Config.NodeName with the field selector
// spec.nodeName=<node> (for PodByIP). In Pods mode "verified" the pod
// watch is cluster-wide instead (every pod of
// the cluster held in memory, trimmed to ~200 bytes, and one watch event
// per pod change on every node: the price of answering pod names only for
// IPs that exist). The informer transform (WithTransform) replaces every
// object, before it is stored, by its name, namespace, UID, resource
// version and the zone's compact model of it, shared with the zone: the
// informer stores then cost ~3 MB beyond the zone for 10k services and
// 100k endpoints, against ~39 MB for trimmed API objects. EndpointSlices,
// which carry nearly every change, skip the informer on a real API server
// (slicewatch.go): one goroutine reads the protobuf watch stream on an
// HTTP/1.1 connection of its own (NewClients; raw reads, rawread_linux.go),
// decodes each slice straight into its model (slimdecode.go) and applies
// what arrived together as one generation, keeping only each slice's
// resource version besides the zone. Nothing resyncs; lists are streaming
// watch-lists (client-go's WatchListClient, its default since v1.35; the
// EndpointSlice watch falls back to a paginated LIST when refused).
// NewClients sets the protobuf content type.
//
// LoadFixture decodes a YAML file of those objects (with client-go's
// decoder); Run with Clients.Objects applies them as the initial lists
// without a clientset (fixture.go), and the tests seed a fake clientset
// with them to go through the informers.
//
// # The zone
//
// Names that are queried often are prebuilt per owner name into immutable
// nodes held in a sharded copy-on-write table: the apex, service names
// (ClusterIP A/AAAA, headless A/AAAA of every ready endpoint, ExternalName
// CNAME), SRV names with their additional records, the empty non-terminals
// and verified pod names. Lookup of those is a hash plus a binary search,
// never takes a lock and does not allocate; nor do negative answers (bar
// labels under a service that look like a dashed IPv6 address without
// being one).
//
// The per-endpoint names, most of a cluster's names and rarely queried, are
// answered at query time instead, and allocate their records:
// <host>.<svc>.<ns>.svc.<zone> from the endpoints of the service found at
// its base name's node (the service's models, shared with the informer
// stores: scanned, or binary-searched from 64 endpoints on), and PTRs of
// ClusterIPs and ready endpoint IPs from a sharded copy-on-write index of
// address → owning services (12 bytes an IPv4 address, 24 an IPv6 one),
// whose targets are built from those services' models. A reverse name is
// in the zone exactly when it is the canonical reverse name of an address
// in that index. Insecure pod names and in-zone CNAME chains allocate too;
// the server memoizes packed answers, each while the Version of its name
// stays put: a publish moves the versions of the services, namespaces, pod
// names and addresses it touched only (scope.go).
//
// The models hold a slice's endpoints compactly: 4 bytes an IPv4 address
// (24 for any other, as a netip.Addr), and a hostname string header only in slices
// where some endpoint has a hostname, against 40 bytes an endpoint as
// netip.Addr and string. Zone and informer stores together hold ~27 MiB of
// live heap for 10k services and 100k endpoints (benchtool zonemem).
//
// One writer applies the queued informer events in batches, the
// EndpointSlice watch its own under the same lock: a change of a
// service or one of its EndpointSlices rebuilds that service's names and
// index entries only, and each batch publishes one new Generation (the SOA
// serial follows it). The base node and the PTR index hold a stable
// per-service handle (svcRef) to the service's entry, so an EndpointSlice
// change of a ClusterIP service replaces the entry alone (its names do not
// depend on endpoints) and touches the PTR index only at the addresses the
// service gained or lost. A rebuilt service (a headless one, whose names
// list its endpoints) puts back into the table only the names whose
// records changed (nodediff.go).
//
// Before the first sync (and without a snapshot) a name the zone would
// deny gets SERVFAIL, never a false NXDOMAIN. If the API server goes away
// the last-known zone keeps being served; list/watch failures are logged at
// most once a minute per resource. Every relist but a watch's first
// waits a random delay below Config.RelistSpread (relist.go), so that the
// agents of a cluster do not all relist when the API server restarts.
//
// With Config.SnapshotPath set, the zone's source objects are written once
// the first sync is applied, then at most once per Config.SnapshotInterval
// after a change (atomically, checksummed, tagged
// with the domain); LoadSnapshot serves them at start until the watches
// sync. A corrupt or foreign snapshot, one holding a model the informers
// could not have built, or one larger than 64 MiB is refused whole. A
// snapshot older than Config.SnapshotMaxAge is not loaded, and one that
// ages past it before the informers sync stops answering: every cluster
// name gets SERVFAIL (rather than NXDOMAIN for services created since), and
// SnapshotProblem says why, for readiness.
//
// # Files
//
//	watch     informers.go (Run, the informers), fixture.go (LoadFixture,
//	          Run on a fixture's objects), client.go
//	          (NewClients), slicewatch.go (the EndpointSlice list and watch
//	          loop), slicestream.go (reading a watch stream), sliceevents.go
//	          (frames to the pending batch), slimwatch.go, relist.go (the
//	          relist spread), rawread_linux.go, rawread_other.go
//	decode    slimdecode.go (EndpointSlice protobuf to its model), pbwire.go
//	          (protobuf wire reading)
//	model     model.go, entry.go, eplist.go, epindex.go, pods.go, hosts.go
//	build     build.go, names.go, srv.go, nodediff.go (names and records of
//	          a service)
//	apply     apply.go, batch.go (events applied as one generation), table.go,
//	          ptrindex.go
//	lookup    lookup.go (answers), zone.go (Zone, New, Stats, metrics),
//	          scope.go (Version: what a publish touched, for the server's memo)
//	snapshot  snapshot.go, snapshot_check.go
//	config    config.go
//
// # Config
//
// Domain (cluster.local.), TTL (5s), NegativeTTL (5s: SOA minimum and TTL),
// Pods (insecure | verified | disabled), NodeName, LocalIPs (NS glue),
// SnapshotPath (none), SnapshotInterval (10s), SnapshotMaxAge (1h),
// RelistSpread (30s; negative: none). See Config.
//
// # Metrics
//
//	nodecache_zone_objects{kind}                      gauge: namespaces, services, endpointslices, endpoints, pods
//	nodecache_zone_synced                             gauge: 1 once synced from the API server
//	nodecache_zone_source{source}                     gauge: 1 for the current source (none, snapshot, api, fixture)
//	nodecache_zone_programming_duration_seconds{from} histogram: event arrival (from=event) or the object's
//	                                                  last write time (from=write, best effort) to the zone updated
//	nodecache_zone_snapshot_writes_total{result}      counter: ok, error
//	nodecache_zone_relists_total                      counter: lists after a watch (not first syncs, not retries)
//	nodecache_zone_relist_wait_seconds_total          counter: seconds relists waited in the spread
package kubezone
