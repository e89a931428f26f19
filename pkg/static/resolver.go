package static

import (
	"context"
	"time"

	"github.com/nodecache/nodecache/pkg/server"
	"github.com/nodecache/nodecache/pkg/wire"
)

// Wrap returns the resolver the server is given with the records in front
// of next: a query for a name in the table is answered from it (Lookup,
// without allocating for A, AAAA and PTR), every other query by next.
func (r *Records) Wrap(next server.Resolver) server.Resolver { return resolver{r, next} }

// resolver is the records in front of next.
type resolver struct {
	r    *Records
	next server.Resolver
}

func (l resolver) Lookup(q *wire.Query, now time.Time) (*wire.Packed, wire.TTLMode, bool) {
	if p, ok := l.r.Lookup(q); ok {
		return p, wire.TTLMode{}, true
	}
	return l.next.Lookup(q, now)
}

// Resolve is next's: a name of the table is answered by Lookup.
func (l resolver) Resolve(ctx context.Context, key wire.Key, by time.Time) (wire.Answer, error) {
	return l.next.Resolve(ctx, key, by)
}
