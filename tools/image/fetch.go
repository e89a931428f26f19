package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// fetcher downloads from Debian's archive: the mirror first, then (for a
// .deb the mirror has dropped since it was pinned) snapshot.debian.org at
// the pins' snapshot time.
type fetcher struct {
	client   *http.Client
	mirror   string // e.g. https://deb.debian.org/ (with the trailing slash)
	snapshot string // e.g. https://snapshot.debian.org/archive/
	log      *slog.Logger
}

func newFetcher(mirror, snapshot string, log *slog.Logger) *fetcher {
	return &fetcher{client: &http.Client{Timeout: 10 * time.Minute}, mirror: mirror, snapshot: snapshot, log: log}
}

// get fetches path under the mirror, trying three times.
func (f *fetcher) get(ctx context.Context, path string) ([]byte, error) {
	return f.getURL(ctx, f.mirror+path)
}

func (f *fetcher) getURL(ctx context.Context, url string) ([]byte, error) {
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(attempt) * 2 * time.Second):
			}
		}
		b, status, err := f.once(ctx, url)
		if err == nil {
			return b, nil
		}
		last = err
		if status == http.StatusNotFound {
			break
		}
	}
	return nil, last
}

func (f *fetcher) once(ctx context.Context, url string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, fmt.Errorf("fetching %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("fetching %s: %w", url, err)
	}
	return b, resp.StatusCode, nil
}

// deb returns the local path of p's .deb in cacheDir, downloading it when
// the cache lacks it; the file's sha256 is checked against the pin either
// way, so a corrupted cache entry is fetched again.
func (f *fetcher) deb(ctx context.Context, cacheDir, snapshot string, p pin) (string, error) {
	local := filepath.Join(cacheDir, p.SHA256+"_"+filepath.Base(p.Path))
	if b, err := os.ReadFile(local); err == nil {
		if sha256Hex(b) == p.SHA256 {
			return local, nil
		}
		f.log.Warn("cached .deb does not match its pin; fetching it again", "file", local)
	}
	b, err := f.get(ctx, p.Path)
	if err != nil && snapshot != "" {
		f.log.Info("the mirror has no longer the pinned .deb; trying snapshot.debian.org", "package", p.Name, "version", p.Version, "err", err)
		root, rest, _ := strings.Cut(p.Path, "/")
		b, err = f.getURL(ctx, f.snapshot+root+"/"+snapshot+"/"+rest)
	}
	if err != nil {
		return "", err
	}
	if got := sha256Hex(b); got != p.SHA256 {
		return "", fmt.Errorf("%s %s %s: downloaded .deb has sha256 %s, the pin says %s", p.Name, p.Version, p.Arch, got, p.SHA256)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	tmp := local + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return "", err
	}
	return local, os.Rename(tmp, local)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
