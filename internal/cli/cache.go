package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/pkg/cache"
)

// cmdCache is `nodecache cache stats | dump [--filter SUFFIX] |
// flush (NAME | --zone SUFFIX | --all)`.
func cmdCache(ctx context.Context, out io.Writer, args []string) error {
	var o cliOpts
	var filter, zone string
	var limit int
	var all bool
	fs := newCLIFlags("cache", &o)
	fs.StringVar(&filter, "filter", "", "dump: only names at or below this suffix")
	fs.IntVar(&limit, "limit", 1000, "dump: at most this many entries")
	fs.StringVar(&zone, "zone", "", "flush: the entries of this name and every name below it")
	fs.BoolVar(&all, "all", false, "flush: every entry")
	pos, err := parseCLI(fs, &o, args, 1, 2)
	if err != nil {
		return err
	}
	c := adminapi.NewClient(o.socket)
	switch pos[0] {
	case "stats":
		st, err := c.CacheStats(ctx)
		if err != nil {
			return err
		}
		return emit(out, &o, st, func(w io.Writer) {
			fmt.Fprintf(w, "entries\t%d\nbytes\t%s\nhit rate\t%.1f%%\nhits\t%d\nmisses\t%d\nstale served\t%d\nevictions\t%d\nprefetches\t%d\n",
				st.Entries, fmtBytes(st.Bytes), 100*st.HitRate, st.Hits, st.Misses, st.Stale, st.Evictions, st.Prefetches)
		})
	case "dump":
		if len(pos) == 2 && filter == "" {
			filter = pos[1]
		}
		entries, err := c.CacheDump(ctx, filter, limit)
		if err != nil {
			return err
		}
		return emit(out, &o, entries, func(w io.Writer) { printDump(w, entries) })
	case "flush":
		return cacheFlush(ctx, out, &o, c, pos[1:], zone, all)
	}
	return usageErrorf("cache: unknown subcommand %q: want stats, dump or flush", pos[0])
}

// cacheFlush is `cache flush NAME | --zone SUFFIX | --all`: exactly one,
// so that a forgotten name never empties the cache.
func cacheFlush(ctx context.Context, out io.Writer, o *cliOpts, c *adminapi.Client, names []string, zone string, all bool) error {
	var s adminapi.FlushScope
	switch {
	case len(names) == 1 && zone == "" && !all:
		s.Name = names[0]
	case len(names) == 0 && zone != "" && !all:
		s.Zone = zone
	case len(names) == 0 && zone == "" && all:
		s.All = true
	default:
		return usageErrorf("cache flush: want exactly one of NAME (that name, every type), --zone SUFFIX (that name and below) or --all; nothing was flushed")
	}
	res, err := c.CacheFlush(ctx, s)
	if err != nil {
		return err
	}
	return emit(out, o, res, func(w io.Writer) {
		switch {
		case res.All:
			fmt.Fprintf(w, "removed %d entries: the whole cache\n", res.Flushed)
		case res.Zone != "":
			fmt.Fprintf(w, "removed %d entries for %s and the names below it\n", res.Flushed, res.Zone)
		default:
			fmt.Fprintf(w, "removed %d entries for %s (every type; names below it kept)\n", res.Flushed, res.Name)
		}
	})
}

func printDump(w io.Writer, entries []cache.EntryInfo) {
	fmt.Fprintln(w, "NAME\tTYPE\tKIND\tRCODE\tTTL\tLEFT\tSIZE\tFLAGS")
	for _, e := range entries {
		flags := ""
		if e.Stale {
			flags += "stale "
		}
		if e.DO {
			flags += "do "
		}
		if e.CD {
			flags += "cd"
		}
		typ, ok := dns.TypeToString[e.Type]
		if !ok {
			typ = "TYPE" + strconv.Itoa(int(e.Type))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.Name, typ, e.Kind, dns.RcodeToString[e.Rcode],
			e.TTL, e.Left.Round(time.Second), e.Size, flags)
	}
	fmt.Fprintf(w, "%d entries\n", len(entries))
}
