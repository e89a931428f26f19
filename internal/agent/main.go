package agent

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/nodecache/nodecache/internal/supervise"
	"github.com/nodecache/nodecache/pkg/logkey"
)

// The entry point of `nodecache run`: flags, logger, and whether this
// process is the supervisor or the agent it supervises.

// NewLogger is the logger c's --log-level and --log-format ask for, on stderr.
func NewLogger(c *Config) (*slog.Logger, error) {
	return supervise.NewLogger(c.LogLevel, string(c.LogFormat))
}

// Main is `nodecache run ARGS`: it parses the flags and runs the agent until
// SIGTERM or SIGINT. version names the build.
func Main(args []string, version string) error {
	cfg, err := ParseConfig(args)
	if err != nil {
		return err
	}
	log, err := NewLogger(cfg)
	if err != nil {
		return err
	}
	sup, err := supervise.Child()
	if err != nil {
		return err
	}
	if sup == nil && cfg.Supervise {
		return supervise.Start(supervise.Launch{Args: append([]string{"run"}, args...), LogLevel: cfg.LogLevel,
			LogFormat: string(cfg.LogFormat), Version: version, OOMScoreAdj: ServingOOMScoreAdj}, log.With(logkey.Component, "supervisor"))
	}
	klog.SetSlogLogger(log.With(logkey.Component, "client-go"))
	// Not with --rewrite-name rules: that restart lists the cluster before it reads (readsBeforeZone).
	gcDefault := applyStartGC(log, sup != nil && restartedOnKeptSockets(sup.Info()) && len(cfg.RewriteNames) == 0)
	applyMemoryLimit(log, "/", sup != nil, int64(cfg.JournalSize), int64(cfg.CacheSize))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	a := New(cfg, log, version)
	a.gcDefault = gcDefault
	if sup != nil {
		defer sup.Close()
		a.sup = sup
		if sup.Info().Stop {
			return a.stopOnly()
		}
	}
	a.hup = make(chan os.Signal, 1)
	signal.Notify(a.hup, syscall.SIGHUP)
	defer signal.Stop(a.hup)
	return a.Run(ctx)
}
