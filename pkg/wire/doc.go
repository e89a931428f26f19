// Package wire holds nodecache's hot path at the byte level: a request parser
// that reads a query's header, question and EDNS OPT record straight from the
// packet without allocating, and Packed, a reply kept as wire bytes together
// with the offsets of its TTL fields (after the Packed, in its own
// allocation: a *Packed is the one pointer to follow), so that a cache hit or a cluster-zone
// answer is written to a client by copying bytes and patching the ID, flags,
// the question's case and the TTLs, with no dns.Msg in between.
//
// ScanUpstream and PackUpstream do the same for the miss path: an upstream
// reply in the plain shape nearly all have is checked and stored from its
// bytes; the caller unpacks any other with miekg/dns.
//
// It is also the one vocabulary of the request path, which every layer
// speaks: the server edge, the cache, the local answers in front of it and
// the upstream forwarder pass a Query, a Key, a Packed reply with its
// TTLMode, an Answer tagged with its Source, and ErrOverloaded, with no
// copy or translation between them.
//
// Parse sorts a packet into one of the server's answers: ErrNoReply (the header
// cannot be read, or the packet is itself a response: send nothing),
// ErrFormat (FORMERR), ErrNotImp (NOTIMP) and ErrBadVers (BADVERS); the
// server maps them to rcodes in one place.
//
// The package has no configuration and no metrics.
package wire
