package cli

import (
	"fmt"
	"strings"

	"github.com/nodecache/nodecache/pkg/resolvconf"
)

// The search-path walk of a pod's stub resolver, for `nodecache explain`.
// It is pure: the outcome of each name comes from a function, so the walk
// is table-tested without an agent.

// Stub resolver flavours the walk can mirror.
const (
	libcGlibc = "glibc" // Debian, Ubuntu, RHEL, distroless/base
	libcMusl  = "musl"  // Alpine
)

// resolverConf is the part of a resolv.conf that decides the walk.
type resolverConf struct {
	Search []string `json:"search"`
	Ndots  int      `json:"ndots"`
	Libc   string   `json:"libc"`
}

// podResolverConf is what kubelet writes for a ClusterFirst pod in ns:
// its namespace's service domain, the cluster's, then the node's search
// list (host, as kubelet reads it), with ndots 5.
func podResolverConf(ns, domain string, host []string) resolverConf {
	search := resolvconf.PodSearch(domain, host, resolvconf.Pod{Namespace: ns, DNSPolicy: "ClusterFirst"})
	return resolverConf{Search: search, Ndots: 5, Libc: libcGlibc}
}

// Outcomes of asking for one name (A and AAAA together, as getaddrinfo does).
const (
	outcomeFound    = "found"    // NOERROR with an answer to either type
	outcomeNXDomain = "nxdomain" // the name does not exist
	outcomeNoData   = "nodata"   // the name exists, not with these types
	outcomeServFail = "servfail" // the server failed
	outcomeError    = "error"    // REFUSED, FORMERR, a timeout, ...
)

// walkStep is one name the resolver asks for, and what came back.
type walkStep struct {
	Name    string `json:"name"`
	Outcome string `json:"outcome"`
}

// walk returns the names a stub resolver of conf asks for when resolving
// name, in order, with their outcomes, and the name that resolved ("" if
// none did). ask gives the outcome of one fully qualified name.
//
// glibc (res_nsearch): a trailing dot means the name alone; a name with at
// least ndots dots is tried as-is first; then each search domain, moving on
// after NXDOMAIN, NODATA and SERVFAIL and leaving the list after any other
// failure; then the name as-is, if not tried yet.
// musl: a trailing dot or at least ndots dots means the name alone;
// otherwise each search domain, stopping at the first answer that is not
// NXDOMAIN, then the name as-is.
func walk(name string, conf resolverConf, ask func(fqdn string) string) ([]walkStep, string) {
	var steps []walkStep
	try := func(fqdn string) bool {
		out := ask(fqdn)
		steps = append(steps, walkStep{Name: fqdn, Outcome: out})
		return out == outcomeFound
	}
	if name == "" || name == "." {
		return nil, ""
	}
	absolute := strings.HasSuffix(name, ".")
	base := strings.TrimSuffix(name, ".")
	asIs := base + "."
	if absolute {
		if try(asIs) {
			return steps, asIs
		}
		return steps, ""
	}
	dots := strings.Count(base, ".")
	triedAsIs := false
	if dots >= conf.Ndots {
		if try(asIs) {
			return steps, asIs
		}
		if conf.Libc == libcMusl {
			return steps, ""
		}
		triedAsIs = true
	}
	for _, d := range conf.Search {
		d = strings.Trim(d, ".")
		fqdn := base + "." + d + "."
		if d == "" {
			fqdn, triedAsIs = asIs, true // the root on the search list
		}
		if try(fqdn) {
			return steps, fqdn
		}
		if !keepSearching(conf.Libc, steps[len(steps)-1].Outcome) {
			break
		}
	}
	if !triedAsIs && try(asIs) {
		return steps, asIs
	}
	return steps, ""
}

// keepSearching reports whether the resolver moves to the next search
// domain after outcome.
func keepSearching(libc, outcome string) bool {
	if libc == libcMusl {
		return outcome == outcomeNXDomain
	}
	switch outcome {
	case outcomeNXDomain, outcomeNoData, outcomeServFail:
		return true
	}
	return false
}

// combineOutcome is the outcome of a name from the replies to its types
// (rcode names and answer counts, A first): found when any type has an
// answer; otherwise the first reply's rcode decides, as in glibc, unless it
// is NOERROR and a later one failed.
func combineOutcome(rcodes []string, answers []int) string {
	for i := range rcodes {
		if rcodes[i] == "NOERROR" && answers[i] > 0 {
			return outcomeFound
		}
	}
	out := outcomeNoData
	for i, rc := range rcodes {
		o := rcodeOutcome(rc)
		if i == 0 || out == outcomeNoData {
			out = o
		}
	}
	return out
}

func rcodeOutcome(rc string) string {
	switch rc {
	case "NOERROR":
		return outcomeNoData
	case "NXDOMAIN":
		return outcomeNXDomain
	case "SERVFAIL":
		return outcomeServFail
	}
	return outcomeError
}

// describeConf is the one-line summary of conf for the report header.
func describeConf(conf resolverConf) string {
	return fmt.Sprintf("%s, ndots %d, search %s", conf.Libc, conf.Ndots, strings.Join(conf.Search, " "))
}
