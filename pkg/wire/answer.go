package wire

import (
	"errors"
	"net/netip"
)

// Source says where an answer came from. The server counts replies by it;
// the cache and the local answers tag what they return with it.
type Source uint8

// Sources of answers, in metric label order.
const (
	SourceLocal    Source = iota // built by the agent itself: errors, ANY, refusals, static records
	SourceZone                   // the cluster zone
	SourceCache                  // a fresh cache entry
	SourceStale                  // an expired cache entry served per RFC 8767
	SourceUpstream               // an upstream's reply, cached or not
	NumSources                   // the number of sources; not a source
)

var sourceNames = [NumSources]string{"local", "zone", "cache", "stale", "upstream"}

func (s Source) String() string {
	if s < NumSources {
		return sourceNames[s]
	}
	return "unknown"
}

// Answer is what the resolving layers (the cache, the local answers in
// front of it) give the server for a query it could not answer inline.
// Packed is shared and read-only.
type Answer struct {
	Packed *Packed        // always non-nil when the error beside it is nil
	Mode   TTLMode        // how to write TTLs: elapsed time, or fixed for stale
	Source Source         // where the answer came from
	Server netip.AddrPort // the upstream that answered, for SourceUpstream
}

// ErrOverloaded is what a layer that sheds load returns (wrapped): the
// upstream forwarder at its in-flight cap. The server answers REFUSED, and
// the cache serves no stale entry for it: the upstream did not fail.
var ErrOverloaded = errors.New("overloaded")
