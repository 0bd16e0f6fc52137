package conformance_test

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// reportingStaleness is an InstancesV2 that reports the TTL of the cache
// it answers from as MaxStaleness, as ccmkit's adapters do.
type reportingStaleness struct {
	cloudprovider.InstancesV2
	ttl time.Duration
}

func (r reportingStaleness) MaxStaleness() time.Duration { return r.ttl }

// cachedTTL is the TTL of cachedInstancesTarget's cache: longer than
// brokenTimeout, so that only a suite that learns it waits long enough.
const cachedTTL = 3 * time.Second

// cachedInstancesTarget is newFakeTarget whose instances answer from an
// instances.Cache with a TTL of cachedTTL, never dropped (no
// Hooks.CloudChanged); report says whether its InstancesV2 reports that
// TTL.
func cachedInstancesTarget(report bool) func(context.Context) (*conformance.Target, error) {
	return targetWith(func(tgt *conformance.Target) error {
		cloud := tgt.Cloud.(*fake.Cloud)
		cache, err := instances.NewCache(cloud.InstanceAPI(), instances.CacheOptions{TTL: cachedTTL})
		if err != nil {
			return err
		}
		adapter, err := instances.NewAdapter(cache, provider.Codec{Scheme: fake.ProviderName}, instances.Options{})
		if err != nil {
			return err
		}
		var inst cloudprovider.InstancesV2 = struct{ cloudprovider.InstancesV2 }{adapter} // hides its own methods
		if report {
			inst = reportingStaleness{adapter, cachedTTL}
		}
		tgt.Cloud = &wrapped{Interface: cloud, inst: func(wrappedInst) cloudprovider.InstancesV2 { return inst }}
		tgt.Hooks.CloudChanged = nil
		return nil
	})
}

// passThroughTarget is newFakeTarget whose Hooks.Listeners reports every
// listener as a pass-through load balancer's: no node port.
func passThroughTarget(ctx context.Context) (*conformance.Target, error) {
	return targetWith(func(tgt *conformance.Target) error {
		listeners := tgt.Hooks.Listeners
		tgt.Hooks.Listeners = func(ctx context.Context, c string, svc *v1.Service) ([]conformance.Listener, error) {
			ls, err := listeners(ctx, c, svc)
			for i := range ls {
				ls[i].NodePort = 0
			}
			return ls, err
		}
		return nil
	})(ctx)
}

// brokenFit are providers the suite must fit, though they differ from
// ccmkit's fake: one whose cache, never dropped, reports its TTL; one whose
// load balancers pass traffic through (Claims.PassThrough).
func brokenFit() []brokenCase {
	type bc = brokenCase
	return []bc{
		{
			name: "pass-through-listeners", want: "",
			reason: "with Claims.PassThrough, Hooks.Listeners reports no node ports, as a pass-through load balancer (GCE's target pools) has none",
			claims: func(c *conformance.Claims) { lbOnly(c); c.PassThrough = true }, target: passThroughTarget,
		},
		{
			name: "pass-through-unclaimed", want: "LB-PORTS", clause: "a changed port replaces the old one",
			also:   []string{"CTRL-SERVICE-PORT", "LB-CLAIMED-FEATURES"},
			reason: "Hooks.Listeners reports no node ports and Claims.PassThrough is not set: every rule that reads the listeners sees them forward nowhere",
			claims: lbOnly, target: passThroughTarget,
		},
		{
			name: "cache-ttl-reported", want: "",
			reason: "instances answer from a cache with a TTL longer than Config.Timeout, never dropped, and report the TTL as MaxStaleness: the suite waits that long, and the provider passes with no MaxStaleness configured",
			claims: instOnly, timeout: brokenTimeout, target: cachedInstancesTarget(true),
		},
	}
}
