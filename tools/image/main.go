// Command image builds the nodecache image without a container daemon: an
// OCI image layout whose index holds linux/amd64 and linux/arm64, each the
// static agent cross-compiled by Go on top of Debian's iptables (nft and
// legacy), conntrack and CA certificates at the versions debian-pins.txt
// pins. Two builds from one commit and one pins file give the same
// digests. It is a module of its own so that the agent's go.mod does not
// carry go-containerregistry. docs/image.md says what is in the image.
//
//	go run . build -src ../.. -out ../../_output/image -version v0.1.0
//	go run . push -layout ../../_output/image -ref REGISTRY/nodecache:v0.1.0
//	go run . pins -out debian-pins.txt      # re-resolve the pins (update-pins.sh)
//	go run . digest -layout ../../_output/image
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const usage = `usage: image build|push|pins|digest [flags]; image CMD -h for the flags`

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], log)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "image:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, log *slog.Logger) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	switch args[0] {
	case "build":
		var o buildOptions
		fs.StringVar(&o.Src, "src", "../..", "the nodecache repository to build the agent from")
		fs.StringVar(&o.Out, "out", "../../_output/image", "the OCI image layout to write (replaced)")
		fs.StringVar(&o.Version, "version", "dev", "the version stamped into the agent (-X main.version) and the image's labels")
		fs.StringVar(&o.Commit, "commit", "", "the commit stamped into the agent (-X main.commit) and the revision label")
		fs.StringVar(&o.Pins, "pins", "debian-pins.txt", "the Debian pins file")
		fs.StringVar(&o.Cache, "cache", defaultCache(), "where downloaded .debs are kept")
		fs.StringVar(&o.Mirror, "mirror", "https://deb.debian.org/", "the Debian mirror")
		fs.StringVar(&o.Repository, "repository", "ghcr.io/nodecache/nodecache", "the image name the layout's index names (with the version as tag)")
		epoch := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "the time of every file and of the image, in seconds since 1970 (default $SOURCE_DATE_EPOCH, else 0)")
		fs.StringVar(&o.Platforms, "platforms", "linux/amd64,linux/arm64", "the platforms of the index")
		fs.StringVar(&o.Binaries, "binaries", "", "also write the binaries here, as nodecache-linux-ARCH and nodecache-supervisor-linux-ARCH (make release)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *epoch != "" {
			n, err := strconv.ParseInt(strings.TrimSpace(*epoch), 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("source date epoch %q: want whole seconds since 1970", *epoch)
			}
			o.Epoch = n
		}
		return build(ctx, o, log)
	case "push":
		layoutDir := fs.String("layout", "../../_output/image", "the OCI image layout make image wrote")
		ref := fs.String("ref", "", "where to push it, e.g. registry.example.com/nodecache:v0.1.0")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return push(ctx, *layoutDir, *ref, log)
	case "digest":
		layoutDir := fs.String("layout", "../../_output/image", "the OCI image layout")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return printDigests(*layoutDir)
	case "pins":
		out := fs.String("out", "debian-pins.txt", "the pins file to write")
		suite := fs.String("suite", "", "the Debian suite (default: the current pins file's)")
		keyring := fs.String("keyring", "/usr/share/keyrings/debian-archive-keyring.gpg", "the keyring gpgv checks InRelease with")
		mirror := fs.String("mirror", "https://deb.debian.org/", "the Debian mirror")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *suite == "" {
			old, err := readPins(*out)
			if err != nil {
				return fmt.Errorf("no -suite and no pins file to take it from: %w", err)
			}
			*suite = old.Suite
		}
		pf, err := updatePins(ctx, newFetcher(*mirror, snapshotBase, log), *suite, *keyring, []string{"amd64", "arm64"})
		if err != nil {
			return err
		}
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		if err := pf.write(f); err != nil {
			f.Close()
			return err
		}
		log.Info("pins written", "file", *out, "suite", *suite, "packages", len(pf.Pins))
		return f.Close()
	}
	return fmt.Errorf("unknown command %q; %s", args[0], usage)
}

const snapshotBase = "https://snapshot.debian.org/archive/"

func defaultCache() string {
	if d := os.Getenv("NODECACHE_IMAGE_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "nodecache-image")
	}
	return filepath.Join(d, "nodecache-image")
}
