package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/logkey"
)

// The cluster zone's source: the API server (or a fixture) and the
// snapshot it starts from.

// startZone loads a snapshot if there is one and starts the informers.
func (a *Agent) startZone(ctx context.Context, g *errgroup.Group) error {
	clients, err := a.kubeClients()
	if err != nil {
		return err
	}
	a.kube = clients.Kube
	if a.cfg.ZoneSnapshot != "" {
		if err := a.zone.LoadSnapshot(); err != nil && !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("not serving from the zone snapshot", logkey.Err, err)
		}
	}
	g.Go(func() error { return a.zone.Run(ctx, clients) })
	return nil
}

func (a *Agent) kubeClients() (kubezone.Clients, error) {
	if a.cfg.Fixture != "" {
		objs, err := kubezone.LoadFixture(a.cfg.Fixture)
		if err != nil {
			return kubezone.Clients{}, fmt.Errorf("--fixture: %w", err)
		}
		return kubezone.Clients{Objects: objs, Fixture: true}, nil
	}
	var rc *rest.Config
	var err error
	if a.cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", a.cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return kubezone.Clients{}, fmt.Errorf("kubernetes client config: %w", err)
	}
	rc.UserAgent = "nodecache/" + a.version
	rc.QPS, rc.Burst = 20, 40
	return kubezone.NewClients(rc)
}

// snapshotFallback is how long a process taking over sockets in which
// queries wait (after a crash or an upgrade) waits for the API server's
// list before it answers from the zone snapshot instead.
const snapshotFallback = time.Second

// readsBeforeZone says whether the process reads its sockets before the
// zone has listed (holdZone): only the supervisor's kept sockets, in which
// queries wait, with a zone, and without --rewrite-name rules.
func (a *Agent) readsBeforeZone() bool {
	return a.keptSockets && a.zone != nil && len(a.cfg.RewriteNames) == 0
}

// holdZone lets a process restarted on the supervisor's sockets read them
// before its zone has listed: hits and misses are answered at once, and
// the zone's names too when the snapshot answers them with records; a
// query whose answer could be negative (a Service created since the
// snapshot was written would get NXDOMAIN) waits, in the server
// (server.HoldZone), until waitZoneSynced would have let the whole process
// start. Not with --rewrite-name rules: a rewritten name may be the zone's,
// and the server cannot tell (the process then waits, as before).
func (a *Agent) holdZone(ctx context.Context) {
	ready := make(chan struct{})
	a.server.HoldZone(ready)
	start := time.Now()
	go func() {
		defer close(ready)
		a.waitZoneSynced(ctx, a.cfg.HandoverWait)
		a.log.Info("the cluster zone answers: its queries that waited go on", "after_reading",
			time.Since(start).Round(100*time.Microsecond).String(), "synced", a.zone.Synced())
	}()
}

// waitZoneSynced waits until the zone has synced from the API server, at
// most d. A snapshot stands in for an API server that does not answer,
// not for one that is about to: it may be up to an interval older than the
// last change, so answering from it while the list is a few milliseconds
// from done could answer NXDOMAIN for a Service created since. It is used
// after snapshotFallback without a sync.
func (a *Agent) waitZoneSynced(ctx context.Context, d time.Duration) {
	if a.zone == nil {
		return
	}
	start := time.Now()
	for ctx.Err() == nil && !a.zone.Synced() {
		waited := time.Since(start)
		if waited >= d || waited >= snapshotFallback && a.zoneAnswers() {
			break
		}
		time.Sleep(time.Millisecond) // queries wait in the sockets meanwhile
	}
	waited := time.Since(start).Round(time.Millisecond)
	switch {
	case a.zone.Synced():
	case a.zoneAnswers():
		a.log.Warn("the API server has not answered; serving the cluster zone from its snapshot", "waited", waited)
	default:
		a.log.Warn("taking over before the zone synced", "waited", waited)
	}
}
