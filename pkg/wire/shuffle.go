package wire

import (
	"encoding/binary"
	"math/rand/v2"
)

// Address record shuffling, CoreDNS's loadbalance (round_robin): the A and
// AAAA records of each RRset come out in a fresh random order in every
// answer, so that clients which take the first address spread over all of
// them. It works on the reply AppendReply has just copied, in place and
// without allocating: the records of one RRset have the same owner bytes
// and the same size, so swapping their data swaps the records. The stored
// Packed is never touched.
//
// Where CoreDNS also moves CNAMEs before the rest of a section and
// shuffles MX records, this keeps every record but the addresses where it
// is: the zone and the upstreams already put CNAMEs first, and what is
// not an address record keeps its order. An RRset is a run of adjacent A
// (or AAAA) records of one section with byte-identical owner names, which
// is how the zone and every common resolver write them (the owners a
// compression pointer to the same name).

// shuffleAddrs shuffles the address RRsets of msg, a reply whose question
// ends at qEnd and whose records' TTL fields are at offs (two bytes each,
// in order). A reply that is not NOERROR is left as it is, as CoreDNS
// leaves it.
func shuffleAddrs(msg []byte, qEnd int, offs []byte) {
	n := len(offs) / 2
	if n < 2 || msg[3]&rcodeMask != 0 {
		return
	}
	an := int(binary.BigEndian.Uint16(msg[6:]))
	ns := int(binary.BigEndian.Uint16(msg[8:]))
	// A run of address records: its first index, the owner's bytes, type.
	runStart, runLen := -1, 0
	var runOwner []byte
	var runType uint16
	flush := func() {
		if runLen >= 2 {
			shuffleRun(msg, offs, runStart, runLen)
		}
		runStart, runLen = -1, 0
	}
	start := qEnd
	for i := range n {
		o := int(binary.BigEndian.Uint16(offs[2*i:]))
		owner := msg[start : o-4]
		typ := binary.BigEndian.Uint16(msg[o-4:])
		end := o + 6 + int(binary.BigEndian.Uint16(msg[o+4:]))
		start = end
		if i == an || i == an+ns { // a section begins: runs stop at its edge
			flush()
		}
		if !isAddrRecord(typ, end-o) {
			flush()
			continue
		}
		if runLen > 0 && typ == runType && string(owner) == string(runOwner) {
			runLen++
			continue
		}
		flush()
		runStart, runLen, runOwner, runType = i, 1, owner, typ
	}
	flush()
}

// isAddrRecord reports whether a record of type typ whose TTL, RDLENGTH
// and data take size bytes is a well-formed A or AAAA record.
func isAddrRecord(typ uint16, size int) bool {
	return typ == typeA && size == 4+2+4 || typ == typeAAAA && size == 4+2+16
}

// shuffleRun shuffles (Fisher-Yates) the data of the count records from
// index first, all A or all AAAA: the addresses move, the TTLs stay (an
// RRset's records share one TTL, RFC 2181 5.2). One 64-bit random number
// gives four 16-bit draws, each scaled to its range by a multiply (the
// bias, at most i/65536, does not matter for spreading load).
func shuffleRun(msg, offs []byte, first, count int) {
	data := func(i int) int { return int(binary.BigEndian.Uint16(offs[2*(first+i):])) + 6 }
	v6 := binary.BigEndian.Uint16(msg[data(0)-2:]) == 16
	var bits uint64
	left := 0
	for i := count - 1; i > 0; i-- {
		if left == 0 {
			bits, left = rand.Uint64(), 4 //nolint:gosec // load spreading, not security
		}
		j := int((bits & 0xFFFF) * uint64(i+1) >> 16)
		bits, left = bits>>16, left-1
		if i == j {
			continue
		}
		a, b := msg[data(i):], msg[data(j):]
		if v6 {
			swap64(a, b)
			swap64(a[8:], b[8:])
		} else {
			x, y := binary.BigEndian.Uint32(a), binary.BigEndian.Uint32(b)
			binary.BigEndian.PutUint32(a, y)
			binary.BigEndian.PutUint32(b, x)
		}
	}
}

func swap64(a, b []byte) {
	x, y := binary.BigEndian.Uint64(a), binary.BigEndian.Uint64(b)
	binary.BigEndian.PutUint64(a, y)
	binary.BigEndian.PutUint64(b, x)
}
