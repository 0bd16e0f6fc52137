package fake_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/internal/throttle"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

// epoch is the start of every fake clock: a fixed moment, so tests are
// deterministic.
var epoch = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// newClock returns a fake clock at epoch and the Option that gives it to
// the cloud.
func newClock() (*clocktesting.FakeClock, fake.Options) {
	clk := clocktesting.NewFakeClock(epoch)
	return clk, fake.Options{Clock: clk}
}

// retryAfter returns the delay of the *api.RetryError err wraps, failing
// the test when it wraps none.
//
// It is the delay the fake asked for: the innermost RetryError of err, as
// the loadbalancer Reconciler puts a back-off of its own before a throttled
// Driver's (see loadbalancer.Reconciler.EnsureLoadBalancer).
func retryAfter(t *testing.T, what string, err error) time.Duration {
	t.Helper()
	var last *api.RetryError
	for _, e := range chain(err) {
		if re, ok := e.(*api.RetryError); ok { //nolint:errorlint // e is one link of the chain, walked by hand for the innermost; errors.As finds the outermost
			last = re
		}
	}
	if last == nil {
		t.Fatalf("%s = %v; want an error wrapping *api.RetryError", what, err)
	}
	return last.RetryAfter()
}

// chain returns err and every error it wraps, depth first, in the order
// errors.As visits them.
func chain(err error) []error {
	if err == nil {
		return nil
	}
	out := []error{err}
	switch u := err.(type) { //nolint:errorlint // unwraps one level by hand to list the chain
	case interface{ Unwrap() error }:
		out = append(out, chain(u.Unwrap())...)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			out = append(out, chain(e)...)
		}
	}
	return out
}

// TestProvisioningDelay: a created load balancer reports no address until
// the delay has passed: Ensure returns an api.RetryError telling the
// service controller to come back when it is ready, GetLoadBalancer says it
// exists with an empty status, the snapshot shows it provisioning; after
// the delay Ensure returns its address without writing.
func TestProvisioningDelay(t *testing.T) {
	clk, withClock := newClock()
	c, nodes := cloudWithNodes(t, fake.Config{LoadBalancers: fake.LoadBalancerSection{ProvisioningDelay: &provider.Duration{Duration: 3 * time.Second}}}, 2, withClock)
	lb := lbOf(t, c)
	svc := service("web")

	_, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
	if got := retryAfter(t, "EnsureLoadBalancer of a new load balancer", err); got != 3*time.Second {
		t.Errorf("RetryAfter = %v; want the provisioning delay 3s", got)
	}
	st, exists, err := lb.GetLoadBalancer(t.Context(), cluster, svc)
	if err != nil || !exists || st == nil || len(st.Ingress) != 0 {
		t.Errorf("GetLoadBalancer while provisioning = %+v, %v, %v; want exists with an empty status", st, exists, err)
	}
	snap := c.Snapshot()
	if len(snap.LoadBalancers) != 1 {
		t.Fatalf("%d load balancers after one Ensure; want 1", len(snap.LoadBalancers))
	}
	got := snap.LoadBalancers[0]
	if !got.Provisioning || len(got.Ingress) != 0 || !got.ReadyAt.Equal(epoch.Add(3*time.Second)) || len(got.VIPs) != 1 {
		t.Errorf("load balancer while provisioning: provisioning %v, ingress %v, readyAt %v, VIPs %v; want true, none, %v, one VIP",
			got.Provisioning, got.Ingress, got.ReadyAt, got.VIPs, epoch.Add(3*time.Second))
	}

	clk.Step(3*time.Second - time.Nanosecond)
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err == nil {
		t.Errorf("EnsureLoadBalancer 1ns before the load balancer is ready succeeded; want an api.RetryError")
	}
	clk.Step(time.Nanosecond)
	c.ResetCalls()
	st, err = lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer after the delay: %v", err)
	}
	if want := []v1.LoadBalancerIngress{{IP: got.VIPs[0]}}; !cmp.Equal(want, st.Ingress) {
		t.Errorf("ingress after the delay = %v; want %v", st.Ingress, want)
	}
	if calls := c.Calls(); calls.Writes != 0 {
		t.Errorf("EnsureLoadBalancer after the delay wrote %v; want nothing (only the address was missing)", calls.ByOp)
	}
	if ready := c.Snapshot().LoadBalancers[0]; ready.Provisioning || len(ready.Ingress) != 1 {
		t.Errorf("snapshot after the delay: provisioning %v, ingress %v; want false and the VIP", ready.Provisioning, ready.Ingress)
	}
}

// TestProvisioningDelayChange: SetProvisioningDelay applies to load
// balancers created afterwards; one already created keeps its moment.
func TestProvisioningDelayChange(t *testing.T) {
	clk, withClock := newClock()
	c, nodes := cloudWithNodes(t, fake.Config{}, 1, withClock)
	lb := lbOf(t, c)
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, service("before"), nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer without a delay: %v", err)
	}
	if err := c.SetProvisioningDelay(time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := c.ProvisioningDelay(); got != time.Minute {
		t.Errorf("ProvisioningDelay() = %v; want 1m", got)
	}
	// Without a configured delay the Reconciler keeps its default RetryAfter.
	_, err := lb.EnsureLoadBalancer(t.Context(), cluster, service("after"), nodes)
	if got := retryAfter(t, "EnsureLoadBalancer after SetProvisioningDelay(1m)", err); got != fake.LBRetryAfter {
		t.Errorf("RetryAfter = %v; want fake.LBRetryAfter", got)
	}
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, service("before"), nodes); err != nil {
		t.Errorf("EnsureLoadBalancer of the load balancer created before the change: %v; want it still ready", err)
	}
	clk.Step(time.Minute)
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, service("after"), nodes); err != nil {
		t.Errorf("EnsureLoadBalancer a minute later: %v; want it ready", err)
	}
	if err := c.SetProvisioningDelay(-time.Second); err == nil || !strings.Contains(err.Error(), "-1s") {
		t.Errorf("SetProvisioningDelay(-1s) = %v; want an error naming -1s", err)
	}
	if got := c.ProvisioningDelay(); got != time.Minute {
		t.Errorf("ProvisioningDelay() after a rejected change = %v; want 1m unchanged", got)
	}
}

// TestProvisioningRetryAfter: the Reconciler's RetryAfter suits the
// configured delay: the delay itself, at most fake.LBRetryAfter.
func TestProvisioningRetryAfter(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		delay  time.Duration
		want   time.Duration
	}{
		{name: "short", reason: "the service controller comes back when the load balancer is ready", delay: 200 * time.Millisecond, want: 200 * time.Millisecond},
		{name: "realistic", reason: "the realistic default", delay: fake.RealisticProvisioningDelay, want: fake.RealisticProvisioningDelay},
		{name: "long", reason: "a long delay is polled at the Reconciler's default", delay: time.Hour, want: fake.LBRetryAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, withClock := newClock()
			c, nodes := cloudWithNodes(t, fake.Config{LoadBalancers: fake.LoadBalancerSection{ProvisioningDelay: &provider.Duration{Duration: tt.delay}}}, 1, withClock)
			_, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("web"), nodes)
			if got := retryAfter(t, "EnsureLoadBalancer", err); got != tt.want {
				t.Errorf("RetryAfter with a delay of %v = %v; want %v (%s)", tt.delay, got, tt.want, tt.reason)
			}
		})
	}
}

// limited returns a cloud with one instance, rate-limited as r, and its
// clock.
func limited(t *testing.T, r fake.RateLimit) (*fake.Cloud, []*v1.Node, *clocktesting.FakeClock) {
	t.Helper()
	clk, withClock := newClock()
	c, nodes := cloudWithNodes(t, fake.Config{RateLimit: r}, 1, withClock)
	return c, nodes, clk
}

// TestRateLimitReads: a burst of reads passes, the next is throttled with
// the time until a token is free, and the bucket refills at its rate, up
// to the burst; throttled calls are counted, per operation too. The limit
// is set at run time (SetRateLimit) on a cloud built without one.
func TestRateLimitReads(t *testing.T) {
	clk, withClock := newClock()
	c, _ := cloudWithNodes(t, fake.Config{}, 1, withClock)
	limit := fake.RateLimit{ReadsPerSecond: ptr.To(4.0), Burst: 3}
	if err := c.SetRateLimit(limit); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(limit, c.RateLimit(), fake.CmpModel); diff != "" {
		t.Errorf("RateLimit() after SetRateLimit (-want +got):\n%s", diff)
	}
	c.ResetCalls()
	read := func() error { // one GetInstance, uncached
		_, err := c.InstanceAPI().GetByID(t.Context(), provider.ProviderID{Scheme: fake.ProviderName, ID: "i-1"})
		return err
	}
	for i := range 3 {
		if err := read(); err != nil {
			t.Fatalf("read %d of a burst of 3: %v", i+1, err)
		}
	}
	err := read()
	if !errors.Is(err, fake.ErrThrottled) {
		t.Fatalf("read 4 after a burst of 3 = %v; want an error wrapping ErrThrottled", err)
	}
	if !throttle.Refused(err) {
		t.Errorf("read 4 after a burst of 3 = %v; want it marked refused (throttle.ErrRefused): the rate limit changes nothing, so caches keep trusting", err)
	}
	if got := retryAfter(t, "the throttled read", err); got != 250*time.Millisecond {
		t.Errorf("RetryAfter = %v; want 250ms (one token at 4 per second)", got)
	}
	clk.Step(249 * time.Millisecond)
	if err := read(); !errors.Is(err, fake.ErrThrottled) {
		t.Errorf("a read 249ms later = %v; want still throttled", err)
	} else if got := retryAfter(t, "the read 249ms later", err); got != time.Millisecond {
		t.Errorf("RetryAfter 249ms later = %v; want 1ms", got)
	}
	clk.Step(time.Millisecond)
	if err := read(); err != nil {
		t.Errorf("a read when a token is free = %v; want it to pass", err)
	}
	clk.Step(time.Hour) // refills to the burst, not beyond
	for i := range 3 {
		if err := read(); err != nil {
			t.Fatalf("read %d after an idle hour: %v", i+1, err)
		}
	}
	if err := read(); !errors.Is(err, fake.ErrThrottled) {
		t.Errorf("read 4 after an idle hour = %v; want throttled: the bucket holds only the burst", err)
	}
	want := fake.Calls{Reads: 10, Throttled: 3, ByOp: map[fake.Op]int64{fake.OpGetInstance: 10},
		ThrottledByOp: map[fake.Op]int64{fake.OpGetInstance: 3}}
	if diff := cmp.Diff(want, c.Calls(), fake.CmpModel); diff != "" {
		t.Errorf("Calls() (-want +got):\n%s", diff)
	}
	if err := c.SetRateLimit(fake.RateLimit{}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := read(); err != nil {
			t.Fatalf("read %d after SetRateLimit(RateLimit{}): %v; want no limit", i+1, err)
		}
	}
}

// TestRateLimitWrites: writes have a bucket of their own (reads do not
// drain it, and throttled writes do not block reads), a throttled write
// changes nothing and says when to come back, and the retry then passes.
func TestRateLimitWrites(t *testing.T) {
	// Reads refill 10 tokens in the 10ms step before each operation;
	// writes one per second.
	c, nodes, clk := limited(t, fake.RateLimit{ReadsPerSecond: ptr.To(1000.0), WritesPerSecond: ptr.To(1.0), Burst: 3})
	step := func() { clk.Step(10 * time.Millisecond) }
	lb := lbOf(t, c)
	svc := service("web")
	for i := range 5 {
		step()
		if _, _, err := lb.GetLoadBalancer(t.Context(), cluster, svc); err != nil {
			t.Fatalf("read %d: %v", i+1, err)
		}
	}
	other, err := c.AddInstance(fake.Instance{Name: "node-02"})
	if err != nil {
		t.Fatal(err)
	}
	both := append(nodes, mustNode(t, c, other.ID))
	// Three writes, at 60, 70 and 80ms: the burst.
	step()
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Fatalf("write 1 (create) after 5 reads: %v; want it to pass: reads have their own bucket", err)
	}
	step()
	if err := lb.UpdateLoadBalancer(t.Context(), cluster, svc, both); err != nil {
		t.Fatalf("write 2 (add a backend): %v", err)
	}
	step()
	svc.Spec.Ports[0].Port = 8080
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, both); err != nil {
		t.Fatalf("write 3 (change the port): %v", err)
	}
	before := c.Snapshot()
	step()
	svc.Spec.Ports[0].Port = 9090
	_, err = lb.EnsureLoadBalancer(t.Context(), cluster, svc, both)
	if !errors.Is(err, fake.ErrThrottled) {
		t.Fatalf("write 4 (change the port again) at 90ms = %v; want throttled", err)
	}
	// The bucket is full again 3s after the first write (at 60ms): the
	// fourth token is free 1s after 2.06s.
	if got := retryAfter(t, "the throttled write", err); got != 970*time.Millisecond {
		t.Errorf("RetryAfter = %v; want 970ms", got)
	}
	if diff := cmp.Diff(before, c.Snapshot(), fake.CmpModel); diff != "" {
		t.Errorf("the throttled write changed the cloud (-before +after):\n%s", diff)
	}
	step()
	if _, _, err := lb.GetLoadBalancer(t.Context(), cluster, svc); err != nil {
		t.Errorf("a read while writes are throttled: %v; want it to pass", err)
	}
	if calls := c.Calls(); calls.Throttled != 1 || !cmp.Equal(calls.ThrottledByOp, map[fake.Op]int64{fake.OpApplyLoadBalancer: 1}) {
		t.Errorf("Calls() = %+v; want exactly one throttled ApplyLoadBalancer", calls)
	}
	clk.Step(960 * time.Millisecond)
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, both); err != nil {
		t.Fatalf("write 4 again after RetryAfter: %v", err)
	}
	if got := c.Snapshot().LoadBalancers[0].Spec.Listeners[0].Port; got != 9090 {
		t.Errorf("port after the retry = %d; want 9090", got)
	}
}

// instanceIDCloud returns a cloud that keeps backends by instance ID,
// with instances vm-1..vm-n (IDs i-1..i-n), and for each a Node named
// otherwise (node-a, node-b, ...: kubelet --hostname-override), with
// spec.providerID fake://i-<k> and the instance's InternalIP.
func instanceIDCloud(t *testing.T, n int, opts ...fake.Options) (*fake.Cloud, []*v1.Node) {
	t.Helper()
	cfg := fake.Config{LoadBalancers: fake.LoadBalancerSection{Backends: fake.BackendsInstanceID}}
	for i := range n {
		cfg.Instances = append(cfg.Instances, fake.Instance{Name: fmt.Sprintf("vm-%d", i+1)})
	}
	c := newCloud(t, cfg, opts...)
	var nodes []*v1.Node
	for i, in := range c.Snapshot().Instances {
		node := mustNode(t, c, in.ID)
		node.Name = fmt.Sprintf("node-%c", 'a'+i)
		node.Labels[v1.LabelHostname] = node.Name
		nodes = append(nodes, node)
	}
	return c, nodes
}

// targets returns the provider IDs of the backends of the only load
// balancer of c, failing the test unless every backend is a bare provider
// ID (no Node name, no address), as a cloud of instance targets keeps it.
func targets(t *testing.T, c *fake.Cloud) []string {
	t.Helper()
	lbs := c.Snapshot().LoadBalancers
	if len(lbs) != 1 {
		t.Fatalf("%d load balancers; want 1", len(lbs))
	}
	if lbs[0].Spec.BackendKey != loadbalancer.BackendKeyProviderID {
		t.Errorf("backendKey = %q; want %q", lbs[0].Spec.BackendKey, loadbalancer.BackendKeyProviderID)
	}
	var out []string
	for _, b := range lbs[0].Spec.Backends {
		if b != (loadbalancer.Backend{ProviderID: b.ProviderID}) {
			t.Errorf("backend %+v; want only its provider ID kept", b)
		}
		out = append(out, b.ProviderID)
	}
	return out
}

// TestInstanceIDBackends: with backends kept by instance ID, Nodes whose
// names differ from their instances' are each a backend exactly once,
// after EnsureLoadBalancer and after every UpdateLoadBalancer; a converged
// load balancer costs no write; a Node without addresses is a backend too
// (the cloud needs only the instance).
func TestInstanceIDBackends(t *testing.T) {
	c, nodes := instanceIDCloud(t, 4)
	lb := lbOf(t, c)
	svc := service("web")
	ids := []string{"fake://i-1", "fake://i-2", "fake://i-3", "fake://i-4"}
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes[:3]); err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	if diff := cmp.Diff(ids[:3], targets(t, c), fake.CmpModel); diff != "" {
		t.Errorf("backends after Ensure (-want +got):\n%s", diff)
	}
	c.ResetCalls()
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes[:3]); err != nil {
		t.Fatalf("second EnsureLoadBalancer: %v", err)
	}
	if calls := c.Calls(); calls.Writes != 0 {
		t.Errorf("converged Ensure wrote %v; want nothing: every instance is a backend", calls.ByOp)
	}
	noAddrs := nodes[3].DeepCopy()
	noAddrs.Status.Addresses = nil
	steps := []struct {
		name  string
		nodes []*v1.Node
		want  []string
	}{
		{name: "add a node without addresses", nodes: []*v1.Node{nodes[2], nodes[0], noAddrs, nodes[1]}, want: ids},
		{name: "remove two", nodes: []*v1.Node{nodes[1], noAddrs}, want: []string{ids[1], ids[3]}},
		{name: "same nodes again", nodes: []*v1.Node{noAddrs, nodes[1]}, want: []string{ids[1], ids[3]}},
		{name: "all", nodes: nodes, want: ids},
	}
	for _, s := range steps {
		if err := lb.UpdateLoadBalancer(t.Context(), cluster, svc, s.nodes); err != nil {
			t.Fatalf("UpdateLoadBalancer (%s): %v", s.name, err)
		}
		if diff := cmp.Diff(s.want, targets(t, c), fake.CmpModel); diff != "" {
			t.Errorf("backends after UpdateLoadBalancer (%s) (-want +got):\n%s", s.name, diff)
		}
	}
}

// TestInstanceIDBackendsRejected: a cloud of instance targets refuses a
// backend that is not one of its live instances, naming its provider ID,
// and changes nothing; removing the backend of a terminated instance
// works. The driver is called directly (through an interceptor's next),
// as a provider's own Plan might call it.
func TestInstanceIDBackendsRejected(t *testing.T) {
	var driver loadbalancer.Driver
	grab := fake.Options{Interceptor: fake.Funcs{ApplyLoadBalancer: func(ctx context.Context, next loadbalancer.Driver, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
		driver = next
		return next.Apply(ctx, a)
	}}}
	c, nodes := instanceIDCloud(t, 3, grab)
	svc := service("web")
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	created, _ := c.LoadBalancerFor(cluster, svc)
	if _, err := c.TerminateInstance("i-3"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		reason     string
		providerID string
		want       string
	}{
		{name: "unknown instance", reason: "the cloud has no such VM", providerID: "fake://i-404", want: `no instance "i-404"`},
		{name: "terminated instance", reason: "a terminated VM cannot receive traffic", providerID: "fake://i-3", want: "terminated"},
		{name: "foreign scheme", reason: "another provider's instance", providerID: "aws:///eu-west-1a/i-0abc", want: "fake"},
		{name: "malformed", reason: "not a provider ID", providerID: "i-1", want: "i-1"},
		{name: "empty", reason: "a backend needs its instance", providerID: "", want: `backend ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := c.Snapshot()
			b := loadbalancer.Backend{NodeName: "node-x", ProviderID: tt.providerID}
			desired, err := loadbalancer.Desired(service("other"), nil, loadbalancer.DesiredInput{Cluster: cluster,
				Capabilities: loadbalancer.Capabilities{BackendKey: loadbalancer.BackendKeyProviderID}})
			if err != nil {
				t.Fatal(err)
			}
			desired.Spec.Backends = []loadbalancer.Backend{b}
			for _, a := range []loadbalancer.Action{
				{Kind: loadbalancer.ActionCreate, Create: desired},
				{Kind: loadbalancer.ActionAddBackends, LoadBalancerID: created.ID, Backends: []loadbalancer.Backend{b}},
			} {
				_, err := driver.Apply(t.Context(), a)
				if !errors.Is(err, fake.ErrInvalidBackend) {
					t.Fatalf("%s with backend %q = %v; want an error wrapping ErrInvalidBackend (%s)", a.Kind, tt.providerID, err, tt.reason)
				}
				for _, w := range []string{fmt.Sprintf("%q", tt.providerID), `node "node-x"`, tt.want} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s error %q; want it to contain %q (%s)", a.Kind, err, w, tt.reason)
					}
				}
			}
			if diff := cmp.Diff(before, c.Snapshot(), fake.CmpModel); diff != "" {
				t.Errorf("a rejected action changed the cloud (-before +after):\n%s", diff)
			}
		})
	}
	remove := loadbalancer.Action{Kind: loadbalancer.ActionRemoveBackends, LoadBalancerID: created.ID,
		Backends: []loadbalancer.Backend{{NodeName: "node-c", ProviderID: "fake://i-3"}}}
	if _, err := driver.Apply(t.Context(), remove); err != nil {
		t.Fatalf("removing the backend of a terminated instance: %v", err)
	}
	if diff := cmp.Diff([]string{"fake://i-1", "fake://i-2"}, targets(t, c), fake.CmpModel); diff != "" {
		t.Errorf("backends after removing the terminated instance (-want +got):\n%s", diff)
	}
}
