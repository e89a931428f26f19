package upstream

import (
	"bytes"
	"encoding/binary"
	"sync"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

const (
	// bufSize is the size of pooled read buffers: at least the 1232 bytes
	// of the DNS flag day advice, enough for common EDNS sizes.
	bufSize    = 4096
	headerSize = 12
	qrBit      = 0x80 // in the third header byte
	tcBit      = 0x02 // in the third header byte
)

type bufPool struct{ p sync.Pool }

func (b *bufPool) get() *[]byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return v
	}
	buf := make([]byte, bufSize)
	return &buf
}

func (b *bufPool) put(buf *[]byte) { b.p.Put(buf) }

// Recycle takes back a buffer lent to a reply (wire.Recycler).
func (b *bufPool) Recycle(buf *[]byte) { b.put(buf) }

var _ wire.Recycler = (*bufPool)(nil)

// verdict is what parseReply makes of a datagram or TCP message.
type verdict int

const (
	replyOK             verdict = iota
	replyTruncated              // TC is set, and the rest may be cut: retry over TCP
	replyTruncatedWhole         // TC is set, and the rest unpacks
	replySpoofed                // wrong ID, QR clear or another question: ignore
	replyMalformed              // does not unpack: ignore
)

// parseReply checks that buf answers the packed query req (with the
// given ID) before trusting it, and reads it once into r, which then
// aliases buf; r is written only for a reply taken (replyOK,
// replyTruncatedWhole). The header is checked on the raw bytes so that a
// spoofed datagram costs no allocation; a reply in the plain shape
// wire.ScanUpstream takes is checked in place, and any other is unpacked,
// as a reply that does not unpack is ignored.
func parseReply(buf []byte, id uint16, req []byte, r *wire.UpstreamReply) verdict {
	if len(buf) < headerSize {
		return replyMalformed
	}
	if binary.BigEndian.Uint16(buf) != id || buf[2]&qrBit == 0 {
		return replySpoofed
	}
	if u, ok := wire.ScanUpstream(buf); ok {
		if !u.AnswersQuery(req) {
			return replySpoofed
		}
		*r = wire.UpstreamReply{Raw: buf, Scanned: true, Scan: u}
		return replyOK
	}
	resp := new(dns.Msg)
	err := resp.Unpack(buf)
	if !sameQuestion(resp, req) {
		if err != nil && len(resp.Question) == 0 {
			return replyMalformed
		}
		return replySpoofed
	}
	truncated := buf[2]&tcBit != 0
	switch {
	case err != nil && truncated:
		// A truncated reply may be cut anywhere after the question.
		return replyTruncated
	case err != nil:
		return replyMalformed
	}
	*r = wire.UpstreamReply{Raw: buf, Msg: resp}
	if truncated {
		return replyTruncatedWhole
	}
	return replyOK
}

// sameQuestion reports whether m's one question is the one of the packed
// query req: name (ignoring case), type and class.
func sameQuestion(m *dns.Msg, req []byte) bool {
	if len(m.Question) != 1 {
		return false
	}
	q := &m.Question[0]
	var name [wire.MaxNameLen]byte
	n, err := dns.PackDomainName(q.Name, name[:], 0, nil, false)
	end := headerSize + n
	return err == nil && len(req) >= end+4 && bytes.EqualFold(name[:n], req[headerSize:end]) &&
		binary.BigEndian.Uint16(req[end:]) == q.Qtype && binary.BigEndian.Uint16(req[end+2:]) == q.Qclass
}
