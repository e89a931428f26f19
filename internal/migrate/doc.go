// Package migrate translates a CoreDNS or node-local-dns Corefile
// (pkg/corefile parses it) into a nodecache config file: the --config YAML
// of `nodecache run`, each setting commented with the directive it
// reproduces, notes on what behaves the same without a setting, and the
// list of what it cannot reproduce. One function per plugin (plugins.go,
// forward.go, local.go, shaping.go: loadbalance and the AAAA template)
// fills a Migration (out.go); Translate
// (translate.go) drives them block by block. zones.go finds the cluster
// domain and reads server keys, pillars.go checks node-local-dns's
// variables, ttl.go sets the TTL caps that depend on every block, and
// Check (check.go) loads what was written the way the agent would.
//
// `nodecache migrate` (internal/cli) reads the input (files or the
// cluster's ConfigMaps), writes the result and maps it to an exit status;
// `nodecache doctor` asks it what the cluster's Corefile would lose.
//
// The package has no config of its own and no metrics.
package migrate
