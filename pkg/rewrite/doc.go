// Package rewrite rewrites query names before they are answered, for the
// `rewrite name` rules of a Corefile that migrate reproduces: exact and
// suffix matches.
//
// An exact rule ("exact FROM TO") asks TO instead of FROM and writes FROM
// back into the reply: the question, and every record owner name and
// CNAME target that is TO. A suffix rule ("suffix .FROM. .TO.") replaces
// the end of the name; the reply's question is written back, and its
// records too only with "answer auto" (as CoreDNS does). The first rule
// that matches applies. Names are compared lowercased.
//
// # Answering
//
// Resolver puts the rules in front of the resolver the server is given
// (the cache): a name a rule takes misses the fast path (Lookup) and is
// answered by Resolve, which asks for the target in the static records,
// then the cluster zone (Local.Zone, for names under Local.Domain, chasing
// a CNAME out of the zone through the next resolver), then the next
// resolver, and writes the asked name back. Every other query goes to the
// next resolver unchanged. SetRules swaps the rules whole (a reload).
//
// The package has no config of its own beyond the rules, and no metrics.
package rewrite
