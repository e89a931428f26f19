// Package static answers names from a hosts-file style table before the
// cache: the inline entries and files of a Corefile's hosts plugin.
//
// # Behaviour
//
// Each entry is "IP NAME [NAME...]" (a line of /etc/hosts; # comments).
// A name in the table is answered with its A records (IPv4 entries) and
// AAAA records (IPv6 entries); a query for another type of such a name
// gets NOERROR with no records (NODATA), as CoreDNS's hosts plugin does.
// The reverse name of every IP is answered with PTR records for its names
// unless Config.NoReverse is set. Names not in the table fall through to
// the cache and the upstreams: Records.Wrap puts the table in front of the
// resolver the server is given. Answers carry Config.TTL.
//
// Files are read at New, and again by Reload and by Run every
// Config.Reload when their size or modification time changed. A file that
// cannot be read or parsed keeps the table as it was (one log line, the
// reload metric counts the failure); a missing file at New is an error.
// Lookup reads an immutable snapshot swapped whole, so a reload never
// shows a half-read table.
//
// # Config
//
// Entries (inline lines), Files, TTL (default 1h, as the hosts plugin),
// Reload (default 5s; negative disables polling), NoReverse.
//
// # Metrics
//
//	nodecache_static_names                 names in the table
//	nodecache_static_reloads_total{result}  result: ok, error
package static
