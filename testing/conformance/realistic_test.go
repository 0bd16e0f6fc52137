package conformance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// Behaviour of the realistic cloud.
const (
	// provisioningCalls is how many successful EnsureLoadBalancer calls of
	// a new load balancer answer "no address yet".
	provisioningCalls = 2
	provisioningRetry = 50 * time.Millisecond
	throttleRetry     = 20 * time.Millisecond
)

// realistic is ccmkit's fake behind what a real cloud adds, as a provider
// team would write it: a load balancer has no address for its first
// provisioningCalls EnsureLoadBalancer calls (an api.RetryError, as
// loadbalancer.Reconciler answers while a load balancer provisions); every
// second GetLoadBalancer of a Service and every third InstanceMetadata of
// a node, the first included, are throttled (an error wrapping an
// api.RetryError); and instances are answered from an instances.Cache of
// its own, over the fake's instance API (fake.Cloud.InstanceAPI: the
// Outage hook's faults reach it), with a TTL of ttl. It is safe for
// concurrent use.
type realistic struct {
	cache *instances.Cache

	ensures, gets, metadata counter
}

// newRealistic returns the realistic provider over cloud, with an
// instance cache of TTL ttl.
func newRealistic(cloud *fake.Cloud, ttl time.Duration) (*realistic, cloudprovider.Interface, error) {
	rc := &realistic{}
	var err error
	if rc.cache, err = instances.NewCache(cloud.InstanceAPI(), instances.CacheOptions{TTL: ttl}); err != nil {
		return nil, nil, err
	}
	adapter, err := instances.NewAdapter(rc.cache, provider.Codec{Scheme: fake.ProviderName}, instances.Options{})
	if err != nil {
		return nil, nil, err
	}
	return rc, &wrapped{
		Interface: cloud,
		lb:        rc.loadBalancer,
		inst: func(wrappedInst) cloudprovider.InstancesV2 {
			return wrappedInst{InstancesV2: adapter, metadata: rc.instanceMetadata}
		},
	}, nil
}

// realisticTarget returns a NewTarget of a fresh realistic cloud over
// newFakeTarget's cloud (and its OtherCluster, when the fake has peers),
// instance cache TTL ttl, with Hooks.CloudChanged dropping that cache when
// changed is true.
func realisticTarget(ttl time.Duration, changed bool) func(context.Context) (*conformance.Target, error) {
	return func(ctx context.Context) (*conformance.Target, error) {
		tgt, err := newFakeTarget(ctx)
		if err != nil {
			return nil, err
		}
		rc, cloud, err := newRealistic(tgt.Cloud.(*fake.Cloud), ttl)
		if err != nil {
			tgt.Close()
			return nil, err
		}
		tgt.Cloud = cloud
		if tgt.OtherCluster != nil {
			if _, tgt.OtherCluster, err = newRealistic(tgt.OtherCluster.(*fake.Cloud), ttl); err != nil {
				tgt.Close()
				return nil, err
			}
		}
		if changed {
			tgt.Hooks.CloudChanged = func(context.Context) error {
				rc.cache.Invalidate()
				return nil
			}
		}
		return tgt, nil
	}
}

// throttled is the error of a throttled cloud API call.
func throttled(call string) error {
	return fmt.Errorf("cloud API: %s: %w", call, api.NewRetryError("429 Too Many Requests", throttleRetry))
}

// loadBalancer is the fake's load balancers, provisioning and throttled.
func (rc *realistic) loadBalancer(b wrappedLB) cloudprovider.LoadBalancer {
	b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
		st, err := next.EnsureLoadBalancer(ctx, c, s, n)
		if err != nil || rc.ensures.add(lbKey(c, s)) > provisioningCalls {
			return st, err
		}
		return nil, fmt.Errorf("load balancer of %s/%s: %w", s.Namespace, s.Name, api.NewRetryError("provisioning, no address yet", provisioningRetry))
	}
	b.get = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
		if rc.gets.add(lbKey(c, s))%2 == 0 {
			return nil, false, throttled("GetLoadBalancer")
		}
		return next.GetLoadBalancer(ctx, c, s)
	}
	b.del = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) error {
		err := next.EnsureLoadBalancerDeleted(ctx, c, s)
		if err == nil {
			rc.ensures.set(lbKey(c, s), 0) // a load balancer made again provisions again
		}
		return err
	}
	return b
}

// instanceMetadata is the cached instances' InstanceMetadata, throttled.
func (rc *realistic) instanceMetadata(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	if rc.metadata.add(n.Name)%3 == 1 {
		return nil, throttled("InstanceMetadata")
	}
	return next.InstanceMetadata(ctx, n)
}

// staleRules are the rules that wait for a change made behind the
// provider's back to show through it.
var staleRules = []string{"CTRL-NODE-SHUTDOWN", "CTRL-NODE-TERMINATED", "INST-NEW-INSTANCE", "INST-STOPPED", "INST-TERMINATED"}

// TestRealisticCloud runs the suite against the realistic cloud: with its
// cache dropped in Hooks.CloudChanged, or its TTL declared in
// Config.MaxStaleness, every rule passes; with neither, exactly the rules
// that wait for an instance change behind the provider's back fail (not
// INST-NEW-INSTANCE: an instances.Cache looks up an instance it has not
// listed directly).
func TestRealisticCloud(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, reason string
		timeout      time.Duration
		ttl          time.Duration
		changed      bool
		maxStaleness time.Duration
		only         []string // rules run; nil: every rule
		want         []string // failing rules
	}{
		{
			name:    "cache-dropped-on-change",
			reason:  "Hooks.CloudChanged drops the instance cache: its TTL does not matter",
			timeout: 5 * time.Second, ttl: time.Hour, changed: true,
			want: []string{},
		},
		{
			name:    "ttl-declared",
			reason:  "Config.MaxStaleness declares the cache TTL, longer than Config.Timeout, and the waits for out-of-band changes add it",
			timeout: 2 * time.Second, ttl: 3 * time.Second, maxStaleness: 3 * time.Second, only: staleRules,
			want: []string{},
		},
		{
			name:    "stale-cache",
			reason:  "neither: a change made behind the provider's back shows only after the TTL, longer than Config.Timeout",
			timeout: 5 * time.Second, ttl: time.Hour,
			want: []string{"CTRL-NODE-SHUTDOWN", "CTRL-NODE-TERMINATED", "INST-STOPPED", "INST-TERMINATED"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := fakeConfig()
			cfg.NewTarget = realisticTarget(tc.ttl, tc.changed)
			cfg.Timeout = tc.timeout
			cfg.MaxStaleness = tc.maxStaleness
			if tc.only != nil {
				cfg.Skip = skipAllBut("not concerned by a cache TTL", tc.only...)
			}
			err := conformance.Check(t.Context(), cfg)
			if d := cmp.Diff(tc.want, failedRules(t, err)); d != "" {
				t.Errorf("%s (%s): failing rules differ (-want +got):\n%s\nreport:\n%v", tc.name, tc.reason, d, err)
			}
		})
	}
}
