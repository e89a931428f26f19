package upstream

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"time"
)

// 0x20 case randomisation (draft-vixie-dnsext-dns0x20): each UDP query goes
// out with the letters of its name in random case, and a server that has
// shown it echoes the case must echo it again: a forged reply must then
// guess one bit per letter on top of the ID and the source port. A server
// that does not echo case (some lowercase the question) is used as before;
// the case proves nothing there. The cache keys and stores names
// lowercased, so nothing downstream sees the random case but owner names an
// upstream echoes without compressing them (still the same name).

// caseStopQueries is how many distinct queries in a row, each of which got
// replies with the right ID and question but only in another case than
// the one sent, make a server known to echo case count as one that stopped
// (a new version, another backend behind its address). Replies are counted
// per query, not per datagram: a forger who gets the ID and port right
// for one query gains nothing by sending many, and while the server
// counts as echoing no reply in another case is ever taken.
const caseStopQueries = 8

// caseRetest is how long a server concluded to have stopped echoing case
// is used without the check before it is tested again: the first reply in
// the case sent after that turns the check back on; one in another case
// leaves it off for another caseRetest. A server behind which some
// backends echo and some do not so costs caseStopQueries failed queries
// per caseRetest, not a share of every query.
const caseRetest = 5 * time.Minute

// questionNameLen returns the length of the uncompressed question name of
// the packed query wire, or 0 when it cannot be read.
func questionNameLen(wire []byte) int {
	for off := headerSize; off < len(wire); {
		l := int(wire[off])
		switch {
		case l == 0:
			return off + 1 - headerSize
		case l&0xC0 != 0:
			return 0
		}
		off += 1 + l
	}
	return 0
}

// randomizeCase sets each letter of wire's question name to a random case,
// and reports whether any is now upper case (only then does an echo prove
// that the server echoes case).
func randomizeCase(wire []byte) (mixed bool) {
	name := wire[headerSize : headerSize+questionNameLen(wire)]
	var bits uint64
	left := 0
	for off := 0; off < len(name) && name[off] != 0; off += 1 + int(name[off]) {
		for i := off + 1; i <= off+int(name[off]) && i < len(name); i++ {
			c := name[i] | 0x20
			if c < 'a' || c > 'z' {
				continue
			}
			if left == 0 {
				bits, left = rand.Uint64(), 64 //nolint:gosec // math/rand/v2 is ChaCha8-seeded per thread
			}
			if bits&1 != 0 {
				c &^= 0x20
				mixed = true
			}
			name[i] = c
			bits >>= 1
			left--
		}
	}
	return mixed
}

// caseEchoed reports whether reply's question name is byte for byte the
// one of the query wire.
func caseEchoed(reply, wire []byte) bool {
	n := questionNameLen(wire)
	return n > 0 && len(reply) >= headerSize+n && bytes.Equal(reply[headerSize:headerSize+n], wire[headerSize:headerSize+n])
}

// caseState is what a server has shown of echoing the query's case.
type caseState struct {
	mu      sync.Mutex // guards following
	echoes  bool       // known to echo: a reply in another case is refused
	stopped time.Time  // when last concluded or re-tested not to echo; zero if never
	misses  int        // distinct queries in a row whose only replies mismatched
}

// accept judges by its question's case one reply that passed the ID and
// question checks: true to take it. echoed is caseEchoed's result, mixed
// randomizeCase's for the query.
func (c *caseState) accept(echoed, mixed bool, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	retest := c.stopped.IsZero() || now.Sub(c.stopped) >= caseRetest
	switch {
	case echoed && mixed:
		c.misses = 0
		if !c.echoes && retest {
			c.echoes, c.stopped = true, time.Time{}
		}
		return true
	case echoed:
		return true // sent all lowercase: an echo proves nothing
	case c.echoes:
		return false
	case !c.stopped.IsZero() && retest:
		c.stopped = now // re-tested, still not echoing
	}
	return true // not known to echo: the case proves nothing
}

// mismatchedOnly notes a query that ended without an answer, all of whose
// replies were refused for their case. It reports whether that made the
// server count as no longer echoing.
func (c *caseState) mismatchedOnly(now time.Time) (stopped bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.echoes {
		return false
	}
	if c.misses++; c.misses < caseStopQueries {
		return false
	}
	c.echoes, c.misses, c.stopped = false, 0, now
	return true
}

// echoing reports whether the server counts as echoing case.
func (c *caseState) echoing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.echoes
}
