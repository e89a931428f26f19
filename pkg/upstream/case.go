package upstream

import (
	"bytes"
	"math/rand/v2"
)

// 0x20 case randomisation (draft-vixie-dnsext-dns0x20): each UDP query goes
// out with the letters of its name in random case, and a server that has
// shown it echoes the case must echo it again: a forged reply must then
// guess one bit per letter on top of the ID and the source port. A server
// that does not echo case (some lowercase the question) is used as before;
// the case proves nothing there. The cache keys and stores names
// lowercased, so nothing downstream sees the random case but owner names an
// upstream echoes without compressing them (still the same name).

// caseMismatchLimit is how many replies in a row with the right ID and
// question but not the case sent make a server that echoed case count as
// one that does not, so that an upstream that stops echoing (a new
// version, another backend behind its address) costs a few tries, not
// every query. A forger must get the ID and port right that many times to
// turn the check off; it needed them once without it.
const caseMismatchLimit = 3

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

// acceptCase judges by its question's case a reply that passed the ID and
// question checks: true to take it. mixed is randomizeCase's result for
// the query.
func (s *server) acceptCase(reply, wire []byte, mixed bool) bool {
	if caseEchoed(reply, wire) {
		if mixed {
			s.echoesCase.Store(true)
		}
		s.caseMisses.Store(0)
		return true
	}
	if !s.echoesCase.Load() {
		return true // not known to echo: the case proves nothing
	}
	if s.caseMisses.Add(1) >= caseMismatchLimit {
		s.echoesCase.Store(false)
		s.caseMisses.Store(0)
		return true
	}
	return false
}
