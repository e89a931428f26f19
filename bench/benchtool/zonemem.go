package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodecache/nodecache/pkg/kubezone"
)

// zoneMem is the heap one synced cluster zone costs: its name table plus
// the trimmed objects its informers keep. The fake clientset's own copy of
// the objects is allocated before the first reading and so not counted.
type zoneMem struct {
	Services, Endpoints, Names int
	HeapBytes                  uint64        // live heap after sync minus live heap before
	SyncTime                   time.Duration // from Run to every endpoint applied
}

// measureZoneMem builds spec in a fake clientset, runs a kubezone.Zone on
// it until every service and endpoint is applied (or timeout) and returns
// the heap growth.
func measureZoneMem(ctx context.Context, spec clusterSpec, timeout time.Duration) (*zoneMem, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	var objs []kruntime.Object
	for _, o := range spec.objects(0) {
		objs = append(objs, o.(kruntime.Object))
	}
	client := fake.NewClientset(objs...)
	z, err := kubezone.New(kubezone.Config{}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, fmt.Errorf("creating zone: %w", err)
	}
	before := liveHeap()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- z.Run(ctx, kubezone.Clients{Kube: client}) }()
	wantEP := spec.Services * spec.Endpoints
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var st kubezone.Stats
	for {
		st = z.Stats()
		if st.Synced && st.Services == spec.Services && st.Endpoints == wantEP {
			break
		}
		select {
		case <-ctx.Done():
			err := <-done
			return nil, errors.Join(fmt.Errorf("zone did not sync (%d/%d services, %d/%d endpoints): %w",
				st.Services, spec.Services, st.Endpoints, wantEP, ctx.Err()), err)
		case err := <-done:
			return nil, fmt.Errorf("zone stopped before sync: %w", err)
		case <-tick.C:
		}
	}
	res := &zoneMem{Services: st.Services, Endpoints: st.Endpoints, Names: st.Names, SyncTime: time.Since(start)}
	after := liveHeap()
	if after > before {
		res.HeapBytes = after - before
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("stopping zone: %w", err)
	}
	runtime.KeepAlive(client)
	return res, nil
}

// liveHeap is HeapAlloc after two full collections.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func (m *zoneMem) format() string {
	return fmt.Sprintf("services=%d endpoints=%d names=%d heap_bytes=%d heap_mib=%.1f bytes_per_endpoint=%d sync_ms=%d",
		m.Services, m.Endpoints, m.Names, m.HeapBytes, float64(m.HeapBytes)/(1<<20),
		m.HeapBytes/uint64(max(m.Endpoints, 1)), m.SyncTime.Milliseconds())
}
