package agent

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/nodecache/nodecache/pkg/logkey"
)

// Stopping: the reverse of the start order, and what a handover or a
// container restart leaves in place.

// shutdown stops serving and, unless a successor took over or
// --skip-teardown is set, removes the rules, then the address and link.
func (a *Agent) shutdown(cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if isHandedOff(a.handedOff) {
		a.log.Info("handed over to a successor; leaving interface and rules in place")
		_ = a.server.StopReading(ctx)
		return nil
	}
	// Rules and address go first, while the sockets still answer: traffic
	// stops being steered here before anything stops serving it.
	if keep, why := a.keepHostState(); keep {
		a.log.Info(why + ": leaving interface and rules in place")
	} else if err := a.iface.Teardown(ctx); err != nil {
		a.log.Error("tearing down interface and rules", logkey.Err, err)
	}
	if err := a.server.Shutdown(ctx); err != nil {
		a.log.Warn("shutting down listeners", logkey.Err, err)
	}
	if a.zone != nil {
		a.log.Info("zone at exit", zoneAttrs(a.zone.Stats())...)
	}
	if cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// keepHostState says whether stopping must leave the interface and rules
// alone, and why: --skip-teardown, or a successor that refused our sockets
// (other --local-ip) and serves on its own, relying on the same link.
func (a *Agent) keepHostState() (bool, string) {
	switch {
	case a.cfg.SkipTeardown:
		return true, "--skip-teardown"
	case a.successorSeen.Load():
		return true, "a successor agent is running"
	}
	if restart, why := a.containerRestart(); restart {
		return true, why
	}
	return false, ""
}

// idleAfterHandover keeps the process of a pod that handed over alive until
// the pod is deleted (see podstate.go): exiting would make the kubelet
// restart it.
func (a *Agent) idleAfterHandover(ctx context.Context) {
	successor := ""
	if p := a.successorPod.Load(); p != nil {
		successor = *p
	}
	if err := a.pod.markSuperseded(successor); err != nil {
		a.log.Error("recording the handover in the pod state dir; a restart of this container would start cold", logkey.Err, err)
	}
	a.probes.set(supersededMux(successor))
	a.log.Info("handed over; idle until this pod is deleted", "successor_pod", successor)
	<-ctx.Done()
	a.log.Info("superseded agent stopping; interface and rules are the successor's")
}

func isHandedOff(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// abort stops what run started in g before serving, for an early return.
func (a *Agent) abort(g *errgroup.Group) error {
	a.stopEarly()
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
