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
		c, err := kubezone.LoadFixture(a.cfg.Fixture)
		if err != nil {
			return kubezone.Clients{}, fmt.Errorf("--fixture: %w", err)
		}
		return kubezone.Clients{Kube: c, Fixture: true}, nil
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

// waitZoneSynced waits until the zone answers (synced, or from a snapshot),
// at most d.
func (a *Agent) waitZoneSynced(ctx context.Context, d time.Duration) {
	if a.zone == nil {
		return
	}
	deadline := time.Now().Add(d)
	for !a.zoneAnswers() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if !a.zoneAnswers() {
		a.log.Warn("taking over before the zone synced", "waited", d)
	}
}
