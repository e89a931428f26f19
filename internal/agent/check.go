package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"

	"github.com/nodecache/nodecache/pkg/static"
	"github.com/nodecache/nodecache/pkg/upstream"
)

// CheckOptions say what CheckConfig leaves out.
type CheckOptions struct {
	// SkipFiles leaves out reading the files the config names (a
	// resolv.conf --upstream, --upstream-tls-ca, --kube-dns-config-dir,
	// --static-file): for a config written on another machine than the
	// pod that mounts them (`nodecache migrate`).
	SkipFiles bool
}

// CheckConfig parses args as `nodecache run` does and loads everything run
// loads before it opens a socket, with the same code (build calls
// loadConfig first): flags and the --config file, the files they name,
// CAs, upstream and stub specs, IPs and ports, every component's config.
// It opens no socket and touches neither the network nor the host. An
// error in the --config file names its line.
func CheckConfig(args []string, o CheckOptions) error {
	cfg, err := ParseConfig(args)
	if err != nil {
		return err
	}
	return cfg.locate(loadConfig(cfg, o))
}

// loadConfig loads cfg as build does, up to the point where build opens
// sockets and starts goroutines.
func loadConfig(cfg *Config, o CheckOptions) error {
	if _, err := newQueryLog(&cfg.QueryLog, slog.New(slog.DiscardHandler)); err != nil {
		return err
	}
	addrs := listenAddrs(cfg.LocalIPs, uint16(cfg.Port))
	sc := staticConfig(cfg)
	var stubs stubConfig
	if o.SkipFiles {
		sc.Files = nil
		if !strings.Contains(cfg.Upstream, "/") {
			if _, err := upstream.ParseServers(cfg.Upstream); err != nil {
				return fmt.Errorf("--upstream: %w", err)
			}
		}
		var err error
		if stubs, _, err = loadStubs("", cfg.StubDomains); err != nil {
			return err
		}
	} else {
		var err error
		if _, stubs, err = upstreamConfig(cfg, addrs, nil); err != nil {
			return err
		}
	}
	if _, err := static.New(sc, nil, nil); err != nil {
		return fmt.Errorf("--static-record/--static-file: %w", err)
	}
	if _, err := parseRewrites(cfg.RewriteNames); err != nil {
		return err
	}
	cc := cacheConfig(cfg, stubs.limits)
	if err := cc.Validate(); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if zoneSource(cfg) {
		zc := zoneConfig(cfg)
		if err := zc.Validate(); err != nil {
			return fmt.Errorf("cluster zone: %w", err)
		}
	}
	srv := serverConfig(cfg, addrs, stubDomainNames(stubs))
	if err := srv.Validate(); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	ic := IfaceConfig(cfg)
	if err := ic.Validate(); err != nil {
		return fmt.Errorf("interface: %w", err)
	}
	return nil
}

// settingRE finds the settings an error names: --NAME, or a --config
// file's `setting NAME:` and `unknown setting "NAME"`.
var settingRE = regexp.MustCompile(`--([a-z][a-z0-9-]*)|setting "?([a-z][a-z0-9-]*)"?`)

// locate prefixes err with the --config file's line that set the
// setting it names (for a list, the item it quotes): the line to fix. A
// setting given on the command line is not the file's; err is then
// returned as it is.
func (c *Config) locate(err error) error {
	var located *locatedError
	if err == nil || c == nil || c.ConfigFile == "" || errors.As(err, &located) {
		return err
	}
	data, rerr := os.ReadFile(c.ConfigFile)
	if rerr != nil {
		return err
	}
	lines := strings.Split(string(data), "\n")
	for _, m := range settingRE.FindAllStringSubmatch(err.Error(), -1) {
		key := m[1] + m[2]
		if key == "config" || c.fromFlags[key] {
			continue
		}
		if n := settingLine(lines, key, err.Error()); n > 0 {
			return &locatedError{file: c.ConfigFile, line: n, err: err}
		}
	}
	return err
}

// settingLine is the 1-based line of key in a YAML map's lines, or of the
// first item under it that msg quotes; 0 when the file has no such key.
func settingLine(lines []string, key, msg string) int {
	for i, l := range lines {
		if !strings.HasPrefix(l, key+":") {
			continue
		}
		for j := i + 1; j < len(lines) && (strings.HasPrefix(lines[j], " ") || strings.HasPrefix(lines[j], "-")); j++ {
			item := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[j]), "-"))
			if v, _, _ := strings.Cut(item, "  #"); v != "" && strings.Contains(msg, strings.Trim(v, `'"`)) {
				return j + 1
			}
		}
		return i + 1
	}
	return 0
}

// locatedError is an error in a --config file, with its line.
type locatedError struct {
	file string
	line int
	err  error
}

func (e *locatedError) Error() string { return fmt.Sprintf("%s:%d: %v", e.file, e.line, e.err) }
func (e *locatedError) Unwrap() error { return e.err }
