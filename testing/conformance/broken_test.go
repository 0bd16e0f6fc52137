package conformance_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// legacyInstances is a legacy Instances implementation; a nil
// *legacyInstances is the typed nil of one broken provider.
type legacyInstances struct{ cloudprovider.Instances }

func readyFalse(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionFalse
		}
	}
	return false
}

// rewriteMetadata breaks InstanceMetadata by applying f to a copy of every
// successful answer.
func rewriteMetadata(f func(n *v1.Node, md *cloudprovider.InstanceMetadata)) wrapped {
	return answerMetadata(func(n *v1.Node, md *cloudprovider.InstanceMetadata) *cloudprovider.InstanceMetadata {
		f(n, md)
		return md
	})
}

// answerMetadata breaks InstanceMetadata by answering, for every
// successful answer, what f returns for a copy of it (nil: (nil, nil)).
func answerMetadata(f func(n *v1.Node, md *cloudprovider.InstanceMetadata) *cloudprovider.InstanceMetadata) wrapped {
	return instMetadata(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
		md, err := next.InstanceMetadata(ctx, n)
		if err == nil && md != nil {
			c := *md
			return f(n, &c), nil
		}
		return md, err
	})
}

// brokenTimeout is Config.Timeout for the broken providers that make rules
// wait it out (a controller waiting in vain for what the provider never
// does, a call that outlives a cancelled context), on claims narrowed to
// the rules concerned: short, but long enough for every rule to finish
// within 4×Timeout under -race on a busy machine. (A case where a
// CTRL-SERVICE-* rule must get past its Service's first ingress before it
// fails keeps the default.)
const brokenTimeout = 2 * time.Second

// narrowed returns cases, each with its claims narrowed by narrow and then
// edited by its own claims func, if any: cases that break one capability
// run only the rules that capability can reach, at a fraction of the time
// (the other rules' controllers poll).
func narrowed(narrow func(*conformance.Claims), cases []brokenCase) []brokenCase {
	for i := range cases {
		own := cases[i].claims
		cases[i].claims = func(c *conformance.Claims) {
			narrow(c)
			if own != nil {
				own(c)
			}
		}
	}
	return cases
}

// oneClusterTarget is newFakeTarget without Target.OtherCluster.
func oneClusterTarget(context.Context) (*conformance.Target, error) {
	return fakeCloudTarget(fakeCloudConfig(), fake.Options{})
}

// targetWith returns a NewTarget: newFakeTarget edited by edit, which may
// replace its providers and set its hooks. edit runs for each target, so
// that the state of a broken provider it builds is its target's own; on
// edit's error the target is closed.
func targetWith(edit func(tgt *conformance.Target) error) func(context.Context) (*conformance.Target, error) {
	return func(ctx context.Context) (*conformance.Target, error) {
		tgt, err := newFakeTarget(ctx)
		if err != nil {
			return nil, err
		}
		if err := edit(tgt); err != nil {
			tgt.Close()
			return nil, err
		}
		return tgt, nil
	}
}

// wrappedTarget returns a NewTarget: newFakeTarget whose Cloud is wrapped
// by what build returns for it (given the fake; build may set the target's
// hooks), built for each target, so that the state build's closures share
// is one provider's own: state declared in a wrapped.inst or wrapped.lb
// func is fresh for each accessor call, and the node controllers call
// InstancesV2 again for every call.
func wrappedTarget(build func(tgt *conformance.Target, cloud *fake.Cloud) wrapped) func(context.Context) (*conformance.Target, error) {
	return targetWith(func(tgt *conformance.Target) error {
		w := build(tgt, tgt.Cloud.(*fake.Cloud))
		w.Interface = tgt.Cloud
		tgt.Cloud = &w
		return nil
	})
}

// byNameOnly returns a copy of n without its provider ID: what a provider
// that looks instances up by Node name alone sees.
func byNameOnly(n *v1.Node) *v1.Node {
	c := n.DeepCopy()
	c.Spec.ProviderID = ""
	return c
}

// wrappingInstances is a legacy Instances whose InstanceID reports every
// node missing with a wrapped cloudprovider.InstanceNotFound; its other
// methods are not called by the suite.
type wrappingInstances struct{ cloudprovider.Instances }

func (wrappingInstances) InstanceID(_ context.Context, name types.NodeName) (string, error) {
	return "", fmt.Errorf("node %s: %w", name, cloudprovider.InstanceNotFound)
}

// brokenCase is one deliberately broken provider: b wraps the target's
// providers and breaks one clause of the rule want.
type brokenCase struct {
	name, reason, want string
	// clause is the clause of want's statement that b breaks: one of
	// the declared clauses of want (clauses<Area>() of its file), quoted
	// from the statement.
	clause string
	// also lists the rules that unavoidably fail with want: a controller
	// rule that checks the same clause through the controller.
	also []string
	// claims, if set, narrows the fake's claims.
	claims func(*conformance.Claims)
	// config, if set, edits the whole Config after claims and timeout: for
	// the registration rules, which read Config.ProviderName and the
	// cloud-configs rather than the Target.
	config func(*conformance.Config)
	// timeout, if set, is Config.Timeout: for providers that make rules
	// wait it out, on claims narrowed to the rules concerned.
	timeout time.Duration
	// target, if set, builds the target instead of newFakeTarget.
	target func(context.Context) (*conformance.Target, error)
	// sharesLBs: when the target has an OtherCluster, the broken provider
	// of that cluster works on Target.Cloud's load balancers, so that what
	// it breaks is the isolation between the two clusters.
	sharesLBs bool
	b         wrapped
}

// wrap applies tc.b to tgt's providers: Cloud, and OtherCluster if any,
// each wrapper with state of its own.
func (tc brokenCase) wrap(tgt *conformance.Target) {
	if tgt.OtherCluster != nil {
		o := tc.b
		o.Interface = tgt.OtherCluster
		if lb, ok := tgt.Cloud.LoadBalancer(); ok && tc.sharesLBs {
			o.Interface = &wrapped{Interface: tgt.OtherCluster, lb: func(wrappedLB) cloudprovider.LoadBalancer { return lb }}
		}
		tgt.OtherCluster = &o
	}
	b := tc.b
	b.Interface = tgt.Cloud
	tgt.Cloud = &b
}

// brokenCases are deliberately broken providers: each breaks one contract
// and must fail exactly the rule named (and the rules it also names).
func brokenCases() []brokenCase {
	type bc = brokenCase
	return slices.Concat(brokenProvider(), brokenLB(), brokenLBShared(), brokenLBFeatures(), brokenLBSteps(), brokenInstances(), brokenRoutes(), brokenNotImplemented(), brokenFit(), []bc{
		{
			name: "metadata-wraps-instance-not-found", want: "", // correct: passes every rule
			reason: "InstanceMetadata of a missing instance returns fmt.Errorf(\"...: %w\", cloudprovider.InstanceNotFound): no upstream caller compares InstancesV2 errors with ==, so this is correct",
			b: instMetadata(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
				md, err := next.InstanceMetadata(ctx, n)
				if err != nil && ctx.Err() == nil {
					return nil, fmt.Errorf("instance of node %s: %w", n.Name, cloudprovider.InstanceNotFound)
				}
				return md, err
			}),
		},
	})
}

// brokenOnly narrows TestBrokenProviders to the broken providers whose name
// or rule matches, while working on them.
var brokenOnly = flag.String("broken", "", "run only the broken providers whose name or rule matches this regexp")

// TestBrokenProviders feeds deliberately broken providers to Check: each
// must fail exactly the rule it breaks, and no other. The checks run
// concurrently (they mostly wait for controllers), then each case reports as
// a subtest.
func TestBrokenProviders(t *testing.T) {
	t.Parallel()
	cases := brokenCases()
	if len(cases) < 12 {
		t.Fatalf("only %d broken providers, expected at least 12", len(cases))
	}
	if *brokenOnly != "" {
		re, err := regexp.Compile(*brokenOnly)
		if err != nil {
			t.Fatalf("-broken %q: %v", *brokenOnly, err)
		}
		cases = slices.DeleteFunc(cases, func(c brokenCase) bool { return !re.MatchString(c.name) && !re.MatchString(c.want) })
	}
	results := make([]error, len(cases))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, tc := range cases {
		cfg := fakeConfig()
		if tc.claims != nil {
			tc.claims(&cfg.Claims)
		}
		if tc.timeout != 0 {
			cfg.Timeout = tc.timeout
		}
		if tc.config != nil {
			tc.config(&cfg)
		}
		newTarget := tc.target
		if newTarget == nil {
			newTarget = newFakeTarget
		}
		cfg.NewTarget = func(ctx context.Context) (*conformance.Target, error) {
			tgt, err := newTarget(ctx)
			if err != nil {
				return nil, err
			}
			tc.wrap(tgt)
			return tgt, nil
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = conformance.Check(t.Context(), cfg)
		})
	}
	wg.Wait()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := results[i]
			want := slices.DeleteFunc(append([]string{tc.want}, tc.also...), func(s string) bool { return s == "" })
			slices.Sort(want)
			if d := cmp.Diff(want, failedRules(t, err)); d != "" {
				t.Errorf("%s (%s): failing rules differ (-want +got):\n%s\nreport:\n%v", tc.name, tc.reason, d, err)
			}
			var f *conformance.Failure
			if errors.As(err, &f) {
				t.Logf("caught: %v", f)
			}
		})
	}
}

// listOnly is an instances.Driver that answers from a list alone: an
// instance missing from it is "not found". Over an instances.Cache it is a
// provider whose cache takes "not in my list" for "gone" without asking the
// cloud.
type listOnly struct{ l instances.ListDriver }

func (d listOnly) find(ctx context.Context, match func(instances.Instance) bool) (instances.Instance, error) {
	list, err := d.l.List(ctx)
	if err != nil {
		return instances.Instance{}, err
	}
	for _, in := range list {
		if match(in) {
			return in, nil
		}
	}
	return instances.Instance{}, instances.ErrNotFound
}

func (d listOnly) GetByID(ctx context.Context, id provider.ProviderID) (instances.Instance, error) {
	return d.find(ctx, func(in instances.Instance) bool { return in.ID == id.ID })
}

func (d listOnly) GetByName(ctx context.Context, name string) (instances.Instance, error) {
	return d.find(ctx, func(in instances.Instance) bool { return in.Name == name })
}

// staleListTarget is newFakeTarget whose instances answer from a one-hour
// cache of the fake's instance list through listOnly, dropped by
// Hooks.CloudChanged: correct after every announced change, wrong about an
// instance created since the cache was filled.
func staleListTarget(ctx context.Context) (*conformance.Target, error) {
	return targetWith(func(tgt *conformance.Target) error {
		cloud := tgt.Cloud.(*fake.Cloud)
		cache, err := instances.NewCache(cloud.InstanceAPI(), instances.CacheOptions{TTL: time.Hour})
		if err != nil {
			return err
		}
		adapter, err := instances.NewAdapter(listOnly{cache}, provider.Codec{Scheme: fake.ProviderName}, instances.Options{})
		if err != nil {
			return err
		}
		tgt.Cloud = &wrapped{Interface: cloud, inst: func(wrappedInst) cloudprovider.InstancesV2 { return adapter }}
		tgt.Hooks.CloudChanged = func(context.Context) error {
			cache.Invalidate()
			return nil
		}
		return nil
	})(ctx)
}
