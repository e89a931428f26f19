package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/pkg/kubezone"
)

// cmdZone is `nodecache zone list [--namespace NS] | show NAME`.
func cmdZone(ctx context.Context, out io.Writer, args []string) error {
	var o cliOpts
	var ns string
	fs := newCLIFlags("zone", &o)
	fs.StringVar(&ns, "namespace", "", "list: only this namespace's records")
	pos, err := parseCLI(fs, &o, args, 1, 2)
	if err != nil {
		return err
	}
	c := adminapi.NewClient(o.socket)
	var recs []kubezone.Record
	switch {
	case pos[0] == "list" && len(pos) == 1:
		recs, err = c.ZoneList(ctx, ns)
	case pos[0] == "show" && len(pos) == 2:
		recs, err = c.ZoneShow(ctx, pos[1])
	default:
		return usageErrorf("zone: want `zone list [--namespace NS]` or `zone show NAME`")
	}
	if err != nil {
		return err
	}
	return emit(out, &o, recs, func(w io.Writer) {
		fmt.Fprintln(w, "NAME\tTTL\tTYPE\tDATA")
		for _, r := range recs {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", r.Name, r.TTL, r.Type, r.Data)
		}
		fmt.Fprintf(w, "%d records\n", len(recs))
	})
}
