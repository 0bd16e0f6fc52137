package conformance_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// stepsAppProtocols are the application protocols the fake serves in the
// targets of this file (Claims.AppProtocols).
var stepsAppProtocols = []string{"http", "https"}

// withAppProtocols claims stepsAppProtocols.
func withAppProtocols(c *conformance.Claims) { c.AppProtocols = stepsAppProtocols }

// stepsBusy is the busy period of the broken providers' busy clouds: more
// than a second, so that the three busy periods of a three-write change
// outlast LB-MULTI-STEP's longest call (2 × 1.2s + 1s), and less than the
// Reconciler's two-second MaxBusyWait, so that a correct provider rides
// each out inside the call.
const stepsBusy = 1200 * time.Millisecond

// brokenLBSteps returns the broken providers of LB-MULTI-STEP, LB-PER-PORT
// and LB-PARTIAL-REPAIR.
func brokenLBSteps() []brokenCase {
	type bc = brokenCase
	busy := func(c *conformance.Config) { c.BusyAfterWrite = stepsBusy }
	return narrowed(lbOnly, []bc{
		// LB-MULTI-STEP
		{
			name: "busy-answered-as-throttled", want: "LB-MULTI-STEP", clause: "with no api.RetryError of more than 2 × max(BusyAfterWrite, 1s)",
			reason: "the Driver answers a write the busy cloud refuses with an api.RetryError (the convention before loadbalancer.Busy), so the Reconciler takes it for throttling and doubles the delay at each write of a change",
			claims: withAppProtocols, config: busy,
			target: stepsTarget(stepsOptions{apps: stepsAppProtocols, busy: busyCloudOf(stepsBusy, answerRetry)}),
		},
		{
			name: "busy-cloud-waited-out", want: "LB-MULTI-STEP", clause: "no call longer than that plus 1s",
			reason: "the Driver sleeps out the busy period after each write, so one EnsureLoadBalancer of a three-write change holds the service controller's worker for three busy periods",
			claims: withAppProtocols, config: busy,
			target: stepsTarget(stepsOptions{apps: stepsAppProtocols, busy: busyCloudOf(stepsBusy, answerSleep)}),
		},
		{
			name: "change-polled-slowly", want: "LB-MULTI-STEP", clause: "within writes × (Config.BusyAfterWrite + 1s)",
			reason: "after changing a load balancer, EnsureLoadBalancer polls the change twice with an api.RetryError of 2s, a fixed poll period, although the cloud is never busy",
			target: stepsTarget(stepsOptions{wrap: pollChanges(2, 2*time.Second)}),
		},

		// LB-PER-PORT
		{
			name: "app-protocol-ignored", want: "LB-PER-PORT", clause: "ports of a claimed appProtocol get listeners that report it",
			reason: "spec.ports[].appProtocol is ignored: every port is built as a plain TCP listener",
			claims: withAppProtocols,
			target: stepsTarget(stepsOptions{apps: stepsAppProtocols}),
			b: lbRewriteService(func(s *v1.Service) {
				for i := range s.Spec.Ports {
					s.Spec.Ports[i].AppProtocol = nil
				}
			}),
		},
		{
			name: "unclaimed-app-protocol-built-as-tcp", want: "LB-PER-PORT", clause: "a port of an unclaimed one is rejected with an error instead of built as plain TCP",
			reason: "a port whose appProtocol the load balancer cannot serve is built as a plain TCP listener instead of rejected",
			claims: withAppProtocols,
			target: stepsTarget(stepsOptions{apps: stepsAppProtocols}),
			b: lbRewriteService(func(s *v1.Service) {
				for i, p := range s.Spec.Ports {
					if p.AppProtocol != nil && !slices.Contains(stepsAppProtocols, *p.AppProtocol) {
						s.Spec.Ports[i].AppProtocol = nil
					}
				}
			}),
		},
		{
			name: "port-setting-rewrites-every-listener", want: "LB-PER-PORT", clause: "a change of one port's setting is one cloud write that leaves the other listener as it was",
			reason: "on a cloud of listener pools, the Driver updates a listener by rewriting every listener of the load balancer, so a certificate changed on one port is a write for each",
			claims: withPools, config: withPortSetting,
			target: poolsTarget(poolsOptions{rewriteAll: true}),
		},

		// LB-PARTIAL-REPAIR
		{
			name: "damage-never-repaired", want: "LB-PARTIAL-REPAIR", clause: "restores exactly its backends and listeners",
			reason:  "the provider answers from its load-balancer cache, which Hooks.CloudChanged does not drop and whose one-minute TTL, which it does not report (no MaxStaleness), outlasts Config.Timeout: a backend removed behind its back is never put back",
			timeout: brokenTimeout,
			target:  stepsTarget(stepsOptions{staleCache: true}),
		},
		{
			name: "damage-repaired-by-rebuild", want: "LB-PARTIAL-REPAIR", clause: "with at most as many cloud writes as objects removed",
			reason: "a load balancer found drifted from what the last EnsureLoadBalancer built is deleted and created again, which repairs a missing backend with a write for every object",
			target: stepsTarget(stepsOptions{wrap: rebuildOnDrift}),
		},

		// Correct: the rules pass.
		{
			name: "listener-pools-busy", want: "", // correct: passes every rule
			reason: "ccmkit's Reconciler on a cloud of listener pools, application protocols and certificates per port, busy for 400ms after each write, with every hook: the load-balancer rules pass, the three of issue 25 included",
			claims: withPools, config: func(c *conformance.Config) { withPortSetting(c); c.BusyAfterWrite = 400 * time.Millisecond },
			target: poolsTarget(poolsOptions{busyAfter: 400 * time.Millisecond, damage: damagePool}),
		},
	})
}

// withPools is the claims of the pools cloud (lbmodel_test.go): TCP, UDP
// and mixed, source ranges, its application protocols.
func withPools(c *conformance.Claims) {
	*c = conformance.Claims{LoadBalancer: true, UDP: true, MixedProtocols: true, SourceRanges: true, SourceRangesAnnotation: true, AppProtocols: poolsAppProtocols}
}

// withPortSetting sets Config.PortSetting to the pools provider's
// certificate.
func withPortSetting(c *conformance.Config) { c.PortSetting = poolsPortSetting }

// clausesLBSteps returns the clauses of the statements of the rules of
// rules_lbsteps.go, each quoted from its statement (see TestBrokenCoverage).
func clausesLBSteps() map[string][]string {
	return map[string][]string{
		"LB-MULTI-STEP":     {"within writes × (Config.BusyAfterWrite + 1s)", "with no api.RetryError of more than 2 × max(BusyAfterWrite, 1s)", "no call longer than that plus 1s"},
		"LB-PER-PORT":       {"ports of a claimed appProtocol get listeners that report it", "a port of an unclaimed one is rejected with an error instead of built as plain TCP", "a change of one port's setting is one cloud write that leaves the other listener as it was"},
		"LB-PARTIAL-REPAIR": {"restores exactly its backends and listeners", "with at most as many cloud writes as objects removed"},
	}
}

// busyAnswer is how a Driver over a busy cloud answers.
type busyAnswer int

const (
	// answerBusy: loadbalancer.Busy after a write the cloud took, and
	// with ErrRefused for one it refused (correct).
	answerBusy busyAnswer = iota
	// answerRetry: nothing after a write the cloud took, and an
	// api.RetryError of the busy period, with ErrRefused, for one it
	// refused: the convention before loadbalancer.Busy, which the
	// Reconciler reads as throttling.
	answerRetry
	// answerSleep: no busy answer; the Driver sleeps the busy period out
	// after each write, and before one the cloud would refuse.
	answerSleep
)

// busyCloud makes the fake's load balancers busy for after after each
// write, refusing writes meanwhile (fake.Funcs.ApplyLoadBalancer), the
// Driver answering as answer says. It is safe for concurrent use.
type busyCloud struct {
	after  time.Duration
	answer busyAnswer

	mu    sync.Mutex
	until map[string]time.Time // by load-balancer ID
}

// busyCloudOf returns a constructor of fresh busyClouds: each target has
// its own.
func busyCloudOf(after time.Duration, answer busyAnswer) func() *busyCloud {
	return func() *busyCloud { return &busyCloud{after: after, answer: answer, until: map[string]time.Time{}} }
}

// left is how long load balancer id stays busy; 0 when it is free.
func (b *busyCloud) left(id string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(time.Until(b.until[id]), 0)
}

func (b *busyCloud) wrote(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.until[id] = time.Now().Add(b.after)
}

// apply is the fake's Apply on the busy cloud.
func (b *busyCloud) apply(ctx context.Context, next loadbalancer.Driver, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	for left := b.left(a.LoadBalancerID); left > 0; left = b.left(a.LoadBalancerID) {
		switch b.answer {
		case answerSleep:
			if err := sleepCtx(ctx, left); err != nil {
				return nil, err
			}
		case answerRetry:
			return nil, fmt.Errorf("cloud: 409 PENDING_UPDATE: %w%w", api.NewRetryError("the load balancer is busy", left), loadbalancer.ErrRefused)
		default:
			return nil, fmt.Errorf("cloud: 409 PENDING_UPDATE: %w%w", loadbalancer.Busy(left, "PENDING_UPDATE"), loadbalancer.ErrRefused)
		}
	}
	lb, err := next.Apply(ctx, a)
	if err != nil || lb == nil {
		return lb, err
	}
	b.wrote(lb.ID)
	if a.Kind == loadbalancer.ActionCreate {
		// Busy from now on, but said only by refusing the next write: the
		// fake's fault layer drops the load balancer of an answer with an
		// error, and a creation must be answered with the one created.
		return lb, nil
	}
	switch b.answer {
	case answerSleep:
		return lb, sleepCtx(ctx, b.after)
	case answerRetry:
		return lb, nil
	}
	return lb, fmt.Errorf("cloud: 202 Accepted: %w", loadbalancer.Busy(b.after, "PENDING_UPDATE"))
}

// sleepCtx waits d, or until ctx ends (then its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stepsOptions configures a stepsTarget.
type stepsOptions struct {
	// apps, if set, are the fake's application protocols.
	apps []string
	// busy, if set, makes the fake's cloud busy after each write.
	busy func() *busyCloud
	// staleCache leaves Hooks.CloudChanged unset and hides the caches' TTL
	// (MaxStaleness): the provider does not see what Hooks.Damage did
	// until its load-balancer cache expires, and does not say when.
	staleCache bool
	// wrap, if set, breaks the provider: it wraps Target.Cloud, given the
	// fake.
	wrap func(cloud *fake.Cloud) wrapped
}

// stepsTarget returns a NewTarget: newFakeTarget's cloud, configured as o
// says, with the hooks the rules of rules_lbsteps.go read: Listeners
// reporting each listener's application protocol, Damage removing one
// backend, and CloudChanged dropping the fake's caches (unless
// o.staleCache), so that the provider sees a Damage at its next look-up.
func stepsTarget(o stepsOptions) func(context.Context) (*conformance.Target, error) {
	return func(context.Context) (*conformance.Target, error) {
		var opts fake.Options
		if len(o.apps) > 0 {
			caps := loadbalancer.Capabilities{UDP: true, SCTP: true, MixedProtocols: true, DualStack: true, NodePortless: true,
				SourceRanges: true, ClientIPAffinity: true, RequestedIP: true, AppProtocols: o.apps}
			opts.LoadBalancerCapabilities = &caps
		}
		if o.busy != nil {
			opts.Interceptor = fake.Funcs{ApplyLoadBalancer: o.busy().apply}
		}
		tgt, err := fakeTarget(fakeCloudConfig(), opts)
		if err != nil {
			return nil, err
		}
		cloud := tgt.Cloud.(*fake.Cloud)
		tgt.Hooks.Listeners = func(_ context.Context, cluster string, svc *v1.Service) ([]conformance.Listener, error) {
			lb, ok := cloud.LoadBalancerFor(cluster, svc)
			if !ok {
				return nil, fmt.Errorf("no load balancer for %s/%s in cluster %q", svc.Namespace, svc.Name, cluster)
			}
			return lbListeners(lb.Spec.Listeners), nil
		}
		tgt.Hooks.Damage = func(_ context.Context, cluster string, svc *v1.Service) (int, error) {
			lb, ok := cloud.LoadBalancerFor(cluster, svc)
			if !ok || len(lb.Spec.Backends) == 0 {
				return 0, fmt.Errorf("no load balancer with backends for %s/%s in cluster %q", svc.Namespace, svc.Name, cluster)
			}
			_, err := cloud.RemoveBackend(lb.ID, lb.Spec.Backends[0].NodeName)
			return 1, err
		}
		if !o.staleCache {
			tgt.Hooks.CloudChanged = func(context.Context) error {
				cloud.SetInterceptor(opts.Interceptor) // the same Funcs: drops the caches
				return nil
			}
		} else {
			// Wrapped, the capabilities no longer report the caches' TTL
			// (MaxStaleness), which the suite would wait out.
			tgt.Cloud = &wrapped{Interface: tgt.Cloud,
				lb:     func(b wrappedLB) cloudprovider.LoadBalancer { return b },
				inst:   func(b wrappedInst) cloudprovider.InstancesV2 { return b },
				routes: func(b wrappedRoutes) cloudprovider.Routes { return b }}
		}
		if o.wrap != nil {
			w := o.wrap(cloud)
			w.Interface = tgt.Cloud
			tgt.Cloud = &w
		}
		return tgt, nil
	}
}

// pollChanges breaks EnsureLoadBalancer of an existing load balancer:
// after a call that wrote to the cloud, it answers polls api.RetryErrors
// of every, calling the provider each time, as a provider that polls an
// asynchronous operation at a fixed period.
func pollChanges(polls int, every time.Duration) func(*fake.Cloud) wrapped {
	return func(cloud *fake.Cloud) wrapped {
		return lbWrap(func(b *wrappedLB) {
			var pending counter
			b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
				_, existed := cloud.LoadBalancerFor(c, s)
				w0 := cloud.Calls().Writes
				st, err := next.EnsureLoadBalancer(ctx, c, s, n)
				if err != nil {
					return st, err
				}
				left, _ := pending.get(lbKey(c, s))
				if existed && cloud.Calls().Writes > w0 {
					left = polls
				}
				if left == 0 {
					return st, nil
				}
				pending.set(lbKey(c, s), left-1)
				return nil, fmt.Errorf("load balancer of %s/%s: %w", s.Namespace, s.Name, api.NewRetryError("the update is in progress", every))
			}
		})
	}
}

// rebuildOnDrift breaks EnsureLoadBalancer of a load balancer that drifted
// from what the last Ensure built: asked for what it built last, and
// finding other backends in the cloud, it deletes the load balancer and
// creates it again.
func rebuildOnDrift(cloud *fake.Cloud) wrapped {
	return lbRemembering(func(b *wrappedLB, mem *lbMemory) {
		b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
			last, ok := mem.get(lbKey(c, s))
			lb, found := cloud.LoadBalancerFor(c, s)
			if ok && found && last.same(s, n) {
				var have []string
				for _, be := range lb.Spec.Backends {
					have = append(have, be.NodeName)
				}
				if !slices.Equal(lbSorted(have), lbSorted(lbNodeNames(n))) {
					if err := next.EnsureLoadBalancerDeleted(ctx, c, s); err != nil {
						return nil, err
					}
				}
			}
			return next.EnsureLoadBalancer(ctx, c, s, n)
		}
	})
}

// TestLBStepsRules runs LB-MULTI-STEP, LB-PER-PORT and LB-PARTIAL-REPAIR
// against correct providers, each configured so that every one of them
// runs: on the fake, with app protocols, idle or busy long enough to take
// RetryErrors; on the pools cloud, busy or not, damaged by a pool member or
// a whole pool. Each rule must pass, not skip.
func TestLBStepsRules(t *testing.T) {
	t.Parallel()
	rules := []string{"LB-MULTI-STEP", "LB-PER-PORT", "LB-PARTIAL-REPAIR"}
	for _, tc := range []struct {
		name, reason string
		busy         time.Duration
		target       func(context.Context) (*conformance.Target, error)
		claims       func(*conformance.Claims)
		portSetting  bool
	}{
		{
			name: "fake", reason: "the fake with application protocols, never busy: every change in one call",
			target: stepsTarget(stepsOptions{apps: stepsAppProtocols}), claims: withAppProtocols,
		},
		{
			name: "fake-busy-in-call", reason: "the fake busy for 600ms after each write: the Reconciler waits each busy period out within its MaxBusyWait",
			busy:   600 * time.Millisecond,
			target: stepsTarget(stepsOptions{apps: stepsAppProtocols, busy: busyCloudOf(600*time.Millisecond, answerBusy)}), claims: withAppProtocols,
		},
		{
			name: "fake-busy-retry", reason: "the fake busy for 2.5s after each write, longer than the Reconciler's MaxBusyWait: each write of a change is a call, answered with an api.RetryError of exactly the busy period",
			busy:   2500 * time.Millisecond,
			target: stepsTarget(stepsOptions{apps: stepsAppProtocols, busy: busyCloudOf(2500*time.Millisecond, answerBusy)}), claims: withAppProtocols,
		},
		{
			name: "pools-member", reason: "the pools cloud, never busy, damaged by one member of one pool",
			target: poolsTarget(poolsOptions{damage: damageMember}), claims: withPools, portSetting: true,
		},
		{
			name: "pools-busy-pool", reason: "the pools cloud busy for 300ms after each write, damaged by a whole pool with its members and health monitor",
			busy:   300 * time.Millisecond,
			target: poolsTarget(poolsOptions{busyAfter: 300 * time.Millisecond, damage: damagePool}), claims: withPools, portSetting: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := fakeConfig()
			cfg.NewTarget = tc.target
			tc.claims(&cfg.Claims)
			cfg.BusyAfterWrite = tc.busy
			if tc.portSetting {
				withPortSetting(&cfg)
			}
			cfg.Skip = skipAllBut("not under test", rules...)
			outs, err := conformance.Evaluate(t.Context(), cfg)
			if err != nil {
				t.Fatalf("%s (%s): Evaluate: %v", tc.name, tc.reason, err)
			}
			for _, o := range outs {
				if !slices.Contains(rules, o.Rule) {
					continue
				}
				if o.Status != conformance.Passed {
					t.Errorf("%s (%s): %s %s, expected it to pass: %q %s", tc.name, tc.reason, o.Rule, o.Status, o.Messages, o.SkipReason)
				}
				for _, l := range o.Logs {
					t.Logf("%s: %s", o.Rule, l)
				}
			}
		})
	}
}
