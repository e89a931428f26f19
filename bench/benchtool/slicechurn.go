package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// sliceChurn is what runSliceChurn did.
type sliceChurn struct {
	Updates, Errors int // Errors: failed writes
	Elapsed         time.Duration
}

// writeSlice writes s, on its own 5 s timeout: the churn's end (ctx) does
// not cut a write short.
func (c clusterSpec) writeSlice(ctx context.Context, cs kubernetes.Interface, s *discoveryv1.EndpointSlice) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := cs.DiscoveryV1().EndpointSlices(s.Namespace).Update(wctx, s, metav1.UpdateOptions{})
	return err
}

func (r sliceChurn) format() string {
	return fmt.Sprintf("updates=%d errors=%d seconds=%.1f rate=%.1f", r.Updates, r.Errors, r.Elapsed.Seconds(),
		float64(r.Updates)/r.Elapsed.Seconds())
}

func runSliceChurnCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("slicechurn", flag.ContinueOnError)
	spec := clusterFlags(fs)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the API server holding the cluster (benchtool cluster)")
	rate := fs.Float64("rate", 20, "EndpointSlice updates per second")
	duration := fs.Duration("duration", 10*time.Second, "how long to update (SIGTERM stops it sooner)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	if *kubeconfig == "" || *rate <= 0 || *duration <= 0 {
		return errors.New("slicechurn: -kubeconfig, a positive -rate and -duration are needed")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("slicechurn: %w", err)
	}
	rc.QPS, rc.Burst = float32(*rate)*2, int(*rate)*2
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("slicechurn: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	res, err := spec.churnSlices(ctx, cs, *rate)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, res.format())
	return err
}

// churnSlices updates the EndpointSlices of the cluster's services at rate
// until ctx ends, services in turn with a stride, two updates each: the
// first endpoint of its slice turns not ready, then ready again (the
// cluster was loaded all ready), as a failing readiness probe does. Up to
// 8 writes are in flight, and ticks a busy machine dropped are made up, so
// that the rate holds. At the end every service it touched is written back
// as loaded (two writes of one service may have landed out of order), so
// that the rows measured after it see the cluster they expect. A write
// fails the run only when most do.
func (c clusterSpec) churnSlices(ctx context.Context, cs kubernetes.Interface, rate float64) (sliceChurn, error) {
	var r sliceChurn
	var updates, failures atomic.Int64
	touched := map[int]bool{}
	start := time.Now()
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8)
	for k := 0; ctx.Err() == nil; k++ {
		// A tick the ticker dropped on a busy machine is made up at once:
		// the rate holds over the run.
		if float64(k) >= time.Since(start).Seconds()*rate {
			select {
			case <-ctx.Done():
				continue
			case <-tick.C:
			}
		}
		select {
		case slots <- struct{}{}: // 8 writes late: wait, and catch up after
		case <-ctx.Done():
			continue
		}
		i := (k / 2 * 7919) % c.Services
		touched[i] = true
		s := c.slice(i)
		if k%2 == 0 && c.Endpoints > 0 {
			notReady := false
			s.Endpoints[0].Conditions.Ready = &notReady
		}
		s.Annotations = map[string]string{"benchtool/churn": strconv.Itoa(k)} // a change even when the state repeats
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := c.writeSlice(ctx, cs, s); err != nil {
				failures.Add(1)
				return
			}
			updates.Add(1)
		}()
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	r.Updates, r.Errors = int(updates.Load()), int(failures.Load())
	for i := range touched { // after the count: restoring is not churn
		s := c.slice(i)
		s.Annotations = map[string]string{"benchtool/churn": "restored"}
		if err := c.writeSlice(ctx, cs, s); err != nil {
			return r, fmt.Errorf("slicechurn: restoring the slice of service %d: %w", i, err)
		}
	}
	if r.Errors > r.Updates {
		return r, fmt.Errorf("slicechurn: %d of %d updates failed", r.Errors, r.Errors+r.Updates)
	}
	return r, nil
}
