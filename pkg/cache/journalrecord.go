package cache

import (
	"errors"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// A journal record is an entry's handover record (encodeRecord) without
// its name: the name is the reply's question's, lowercased, as the key's
// is. That is about a sixth of a record, and so of the ring's memory, for
// the same entries. handoverRecord puts the name back before the record
// is judged as a handover record is (decodeRecord).
const (
	journalRecordFixedLen = recordFixedLen - 1 // the handover record's, less the name's length
	// The shortest journal record holds a reply's header and a question
	// for the root; the longest a reply of dns.MaxMsgSize.
	minJournalRecordLen = journalRecordFixedLen + 12 + 1 + 4
	maxJournalRecordLen = journalRecordFixedLen + dns.MaxMsgSize
)

// journalRecordLen is the length of e's journal record.
func journalRecordLen(e *entry) int { return journalRecordFixedLen + e.packed.Len() }

// appendJournalRecord appends e's journal record to b.
func appendJournalRecord(b []byte, e *entry) []byte {
	n := len(b)
	b = encodeRecord(b, e)
	nl := int(b[n])
	return append(b[:n], b[n+1+nl:]...)
}

// handoverRecord returns, in dst's array, the handover record of the
// journal record rec: the name of its reply's question, lowercased, then
// rec.
func handoverRecord(dst, rec []byte) ([]byte, error) {
	if len(rec) < minJournalRecordLen {
		return nil, errors.New("record too short for a reply")
	}
	msg := rec[journalRecordFixedLen:]
	end := 12 // the question's name: labels, never a pointer (nothing precedes it)
	for {
		if end >= len(msg) {
			return nil, errors.New("question name overruns the reply")
		}
		l := int(msg[end])
		end += 1 + l
		if l == 0 {
			break
		}
		if l > 63 {
			return nil, errors.New("bad label in the question name")
		}
	}
	name := msg[12:end]
	if len(name) > wire.MaxNameLen {
		return nil, errors.New("question name too long")
	}
	dst = append(dst[:0], byte(len(name)))
	for _, c := range name { // length bytes are at most 63: below 'A'
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return append(dst, rec...), nil
}
