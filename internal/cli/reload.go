package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/nodecache/nodecache/internal/adminapi"
)

// cmdReload is `nodecache reload`: apply the config files now.
func cmdReload(ctx context.Context, out io.Writer, args []string) error {
	var o cliOpts
	fs := newCLIFlags("reload", &o)
	if _, err := parseCLI(fs, &o, args, 0, 0); err != nil {
		return err
	}
	rep, err := adminapi.NewClient(o.socket).Reload(ctx)
	if err != nil {
		return err
	}
	return emitReload(out, &o, rep)
}

func emitReload(out io.Writer, o *cliOpts, rep adminapi.Reload) error {
	if err := emit(out, o, rep, func(w io.Writer) {
		if rep.Error != "" {
			fmt.Fprintf(w, "reload refused; generation %d keeps serving: %s\n", rep.Generation, rep.Error)
			return
		}
		fmt.Fprintf(w, "config generation %d is live\n", rep.Generation)
	}); err != nil {
		return err
	}
	if rep.Error != "" {
		return fmt.Errorf("reload refused: %s", rep.Error)
	}
	return nil
}
