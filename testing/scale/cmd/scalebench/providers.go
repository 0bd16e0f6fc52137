package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	upstream "k8s.io/cloud-provider/fake"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	ccmkitprovider "github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/testing/scale"
)

// provider is one provider the bench runs.
type provider struct {
	key  string // its name on the command line (-providers)
	name string
	// target builds the provider, its caches' TTLs a simulated minute:
	// time.Minute divided by the run's compression, tuning.Compression
	// (the -compression flag, 100 by default) but for realTime providers.
	// The controllers' periods are divided by it too, so a one-minute
	// cache serves the simulated minute it would in a cluster (the fake's
	// clock is real time). A minute is the default TTL of instances.Cache
	// and loadbalancer.Cache and the README's recommendation for
	// routes.Options.ListTTL. What compression cannot shrink is the CPU
	// time of the work itself: a phase that takes a second of CPU spans
	// 100 simulated seconds at 100, more TTLs than in a cluster.
	target func(ttl time.Duration) (*scale.Target, error)
	// limit is the cloud's rate limit, for the convergence bound the
	// tables report; nil: unlimited.
	limit *rates
	// realTime runs the provider uncompressed (scale.Config.Compression
	// 1): a rate limit is in real time, and with periods divided by 100
	// the controllers' periodic reads alone would ask 100 times what they
	// ask of a real cloud. The steady hour is then skipped.
	realTime bool
	// timeout is scale.Config.Timeout; 0: the simulator's default.
	timeout time.Duration
}

// config is the scale.Config of p's run at sz.
func (p provider) config(sz size) scale.Config {
	cfg := scale.Config{Nodes: sz.nodes, Services: sz.services, Spread: spread(sz.nodes), Compression: tuning.Compression, Timeout: p.timeout,
		RoutePeriod: tuning.RoutePeriod, NodeMonitorPeriod: tuning.NodeMonitorPeriod, DriftRepairPeriod: tuning.DriftRepairPeriod, Skip: tuning.Skip}
	if p.realTime {
		cfg.Compression = 1
		if !slices.Contains(cfg.Skip, scale.Steady) {
			cfg.Skip = append(slices.Clone(cfg.Skip), scale.Steady)
		}
	}
	return cfg
}

// rates are a rate-limited cloud's budgets, calls per second.
type rates struct{ reads, writes float64 }

// coalesceWindow is the -coalesce-window flag: the coalesced providers'
// window in real time; 0: loadbalancer.RecommendedCoalesceWindow
// compressed.
var coalesceWindow time.Duration

// limit is the rate limit of the "limited" provider, the budgets the
// issue's acceptance names.
var limit = rates{reads: 20, writes: 10}

var providers = []provider{
	{key: "ccmkit", name: "ccmkit fake", target: ccmkitFake},
	{key: "coalesced", name: "ccmkit fake, coalesced", target: ccmkitCoalesced},
	{key: "shared", name: "ccmkit fake, shared pools", target: ccmkitSharedPools},
	{key: "shared-coalesced", name: "ccmkit fake, shared pools, coalesced", target: ccmkitSharedCoalesced},
	{key: "limited", name: "ccmkit fake, shared pools, rate-limited", target: ccmkitLimited, limit: &limit, realTime: true, timeout: 15 * time.Minute},
	{key: "limited-coalesced", name: "ccmkit fake, shared pools, coalesced, rate-limited", target: ccmkitLimitedCoalesced, limit: &limit, realTime: true, timeout: 15 * time.Minute},
	{key: "realistic", name: "ccmkit fake, realistic mode, shared pools", target: ccmkitRealistic, limit: &limit, realTime: true, timeout: 15 * time.Minute},
	{key: "upstream", name: "upstream fake", target: upstreamFake},
}

// providerNames lists the providers' keys, for the -providers flag's
// usage.
func providerNames() string {
	names := make([]string, len(providers))
	for i, p := range providers {
		names[i] = strconv.Quote(p.key) + " (" + p.name + ")"
	}
	return strings.Join(names, ", ")
}

// selectProviders returns the providers whose keys are in the
// comma-separated list, in the list's order; all of them for "".
func selectProviders(list string) ([]provider, error) {
	if strings.TrimSpace(list) == "" {
		return providers, nil
	}
	var out []provider
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(providers, func(p provider) bool { return p.key == name })
		if i < 0 {
			return nil, fmt.Errorf("-providers: %q: expected one of %s", name, providerNames())
		}
		out = append(out, providers[i])
	}
	return out, nil
}

// ccmkitFake is ccmkit's fake at its defaults, its cache TTLs compressed.
func ccmkitFake(ttl time.Duration) (*scale.Target, error) {
	return fakeWith(fake.Config{ClusterID: "scale"}, ttl)
}

// ccmkitCoalesced is ccmkitFake with the example cloud-controller-
// manager's coalesced node sync: loadbalancer.RecommendedCoalesceWindow,
// compressed as the TTLs are (ttl is a simulated minute), so that a
// window spans the simulated time it would in a cluster.
func ccmkitCoalesced(ttl time.Duration) (*scale.Target, error) {
	return fakeWith(coalesced(fake.Config{ClusterID: "scale"}, ttl), ttl)
}

// ccmkitSharedCoalesced is ccmkitSharedPools with coalesced pool
// writes, as ccmkitCoalesced.
func ccmkitSharedCoalesced(ttl time.Duration) (*scale.Target, error) {
	return fakeWith(coalesced(atScale(ttl), ttl), ttl)
}

// coalesced sets cfg's coalescing window to
// loadbalancer.RecommendedCoalesceWindow compressed as ttl, a simulated
// minute, is, or to the -coalesce-window flag's, uncompressed.
func coalesced(cfg fake.Config, ttl time.Duration) fake.Config {
	w := coalesceWindow // -coalesce-window, in real time
	if w == 0 {
		w = time.Duration(float64(loadbalancer.RecommendedCoalesceWindow) * float64(ttl) / float64(time.Minute)) // in float: 2s × 1m overflows a Duration
	}
	cfg.LoadBalancers.CoalesceWindow = &ccmkitprovider.Duration{Duration: w}
	return cfg
}

// ccmkitSharedPools is ccmkit's fake as the README's "Running at scale"
// composes a provider: the load balancers of every Service reference one
// backend pool (loadBalancers.backendPools: shared), so a Node change is
// one pool write however many Services there are, and the route table
// answers the route controller's lists for a minute (routes.listTTL).
func ccmkitSharedPools(ttl time.Duration) (*scale.Target, error) {
	return fakeWith(atScale(ttl), ttl)
}

// ccmkitLimited is ccmkitSharedPools over a cloud that allows 20 reads
// and 10 writes a second (burst 20), answering a call over the budget
// with a throttled error carrying Retry-After.
func ccmkitLimited(ttl time.Duration) (*scale.Target, error) {
	return fakeWith(limited(atScale(ttl)), ttl)
}

// limited sets cfg's rate limit to limit's budgets, burst 20.
func limited(cfg fake.Config) fake.Config {
	cfg.RateLimit = fake.RateLimit{ReadsPerSecond: &limit.reads, WritesPerSecond: &limit.writes, Burst: 20}
	return cfg
}

// ccmkitLimitedCoalesced is ccmkitLimited with coalesced pool writes:
// loadbalancer.RecommendedCoalesceWindow, in real time as the run is.
func ccmkitLimitedCoalesced(ttl time.Duration) (*scale.Target, error) {
	return fakeWith(coalesced(limited(atScale(ttl)), ttl), ttl)
}

// ccmkitRealistic is ccmkitSharedPools on the fake's realistic mode:
// load balancers provision asynchronously, backends are kept by instance
// ID, and the API allows 20 reads and 10 writes a second with
// Retry-After (the rates of limit).
func ccmkitRealistic(ttl time.Duration) (*scale.Target, error) {
	cfg := atScale(ttl)
	cfg.Realistic = true
	return fakeWith(cfg, ttl)
}

// atScale is the fake's configuration of ccmkitSharedPools: shared pools,
// and a route list TTL of ttl.
func atScale(ttl time.Duration) fake.Config {
	cfg := fake.Config{ClusterID: "scale", LoadBalancers: fake.LoadBalancerSection{BackendPools: fake.BackendPoolsShared}}
	cfg.Routes.ListTTL.Duration = ttl
	return cfg
}

// fakeWith is the target of ccmkit's fake built from cfg, as the cluster
// cfg.ClusterID, its instance and load-balancer caches' TTLs ttl.
func fakeWith(cfg fake.Config, ttl time.Duration) (*scale.Target, error) {
	cfg.InstanceCacheTTL.Duration = ttl
	cfg.LoadBalancerCacheTTL.Duration = ttl
	c, err := fake.New(cfg, fake.Options{})
	if err != nil {
		return nil, err
	}
	return scale.FakeTarget(c, cfg), nil
}

// upstreamFake is k8s.io/cloud-provider/fake as upstream's own controller
// tests configure it: InstancesV2 on, every instance existing, a fixed
// load-balancer address. Its InstanceMetadata reports one address list
// and a provider ID from a map for every node; OverrideInstanceMetadata
// gives each Node its own provider ID, so the cloud node controller
// initializes it, without a data race on that map.
func upstreamFake(time.Duration) (*scale.Target, error) {
	f := &upstream.Cloud{
		EnableInstancesV2:  true,
		ExistsByProviderID: true,
		ExternalIP:         net.ParseIP("192.0.2.1"),
		RouteMap:           map[string]*upstream.Route{},
		Provider:           "fake",
	}
	var mu sync.Mutex
	addrs := map[string]string{}
	f.OverrideInstanceMetadata = func(_ context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
		mu.Lock()
		defer mu.Unlock()
		return &cloudprovider.InstanceMetadata{ProviderID: "fake://" + n.Name,
			NodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: addrs[n.Name]}}}, nil
	}
	return &scale.Target{
		Cloud: f,
		AddInstance: func(_ context.Context, name string) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			i := len(addrs) + 1
			addrs[name] = net.IPv4(10, 1, byte(i>>8), byte(i)).String() //nolint:gosec // G115: the low bytes of the instance number, truncated on purpose
			return "", nil
		},
	}, nil
}
