package ccmkit_test

// The conformance suite against the README's hierarchical walkthrough
// provider: newOcta, exactly as Example_hierarchicalProvider builds it
// (both caches with their default one-minute TTL, the Reconciler's default
// MaxBusyWait of 2s), over a sandbox octa cloud on the real clock, busy
// for octaPending (1s) after every write and refusing writes meanwhile
// with a 409, whose VM IDs are not its Node names. And the SDK calls of a
// bring-up, counted.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/internal/readme"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// TestHierarchicalConformance: octa passes the suite with production
// settings and no Config.Skip. It claims what it builds: load balancers
// (with source ranges, from the spec and the annotation) and instances;
// no UDP or SCTP (octa's listeners here are TCP, HTTP and HTTPS), no
// routes (octa's network routes pods itself), no shared pools (a pool
// per listener).
func TestHierarchicalConformance(t *testing.T) {
	t.Parallel() // mostly waits out the cloud's busy windows: beside the package's other suites
	outs := conformance.Run(t, conformance.Config{
		ProviderName:   "octa",
		CloudConfig:    "clusterID: conformance\nendpoint: https://api.octa\ntoken: t0k3n\n",
		BadCloudConfig: "endpoint: https://api.octa\n", // no clusterID: Validate rejects it
		Claims:         conformance.Claims{LoadBalancer: true, InstancesV2: true, SourceRanges: true, SourceRangesAnnotation: true},
		NewTarget:      newOctaSandbox,
	})
	readme.CheckPasses(t, octaREADME(t), "octa", outs)
}

// octaREADME is the README's subsection on octa, its white space
// collapsed.
func octaREADME(t *testing.T) string {
	t.Helper()
	_, sub, ok := strings.Cut(readme.Section(t, "README.md", "Your own provider in ~30 lines"), "### A hierarchical cloud (Octavia-like)")
	if !ok {
		t.Fatal(`README.md has no subsection "A hierarchical cloud (Octavia-like)" in "Your own provider in ~30 lines"`)
	}
	return sub
}

// newOctaSandbox builds an octa cloud with four VMs (IDs i-N, names
// worker-N), octa over it as cluster "conformance" and, as
// Target.OtherCluster, as cluster "conformance-other". The Node of the
// fourth VM is named unlike it (Target.RenamedNodes).
func newOctaSandbox(context.Context) (*conformance.Target, error) {
	cloudAPI := newOctaAPI(clock.RealClock{}, octaPending)
	compute := &acmeAPI{lbs: map[string]*loadbalancer.LoadBalancer{}}
	for range 4 {
		compute.addVM("")
	}
	const cluster = "conformance"
	p, err := newOcta(&Config{ClusterID: cluster}, cloudAPI, compute, nil)
	if err != nil {
		return nil, err
	}
	other, err := newOcta(&Config{ClusterID: cluster + "-other"}, cloudAPI, compute, nil)
	if err != nil {
		return nil, err
	}
	var nodes []*v1.Node
	vms, _ := compute.vms()
	for _, vm := range vms {
		nodes = append(nodes, octaNode(vm))
	}
	renamed := nodes[len(nodes)-1:] // a kubelet run with --hostname-override and --provider-id
	nodes = nodes[:len(nodes)-1]
	renamed[0].Name = "edge-gateway"
	s := &octaSandbox{api: cloudAPI, compute: compute, cluster: cluster,
		nodeName: map[string]string{renamed[0].Spec.ProviderID: renamed[0].Name}}
	state := func(change func(id string) error) func(context.Context, *v1.Node) error {
		return func(_ context.Context, n *v1.Node) error {
			return change(strings.TrimPrefix(n.Spec.ProviderID, "octa://"))
		}
	}
	return &conformance.Target{
		Cloud:        p,
		OtherCluster: other,
		Nodes:        nodes,
		RenamedNodes: renamed,
		Hooks: conformance.Hooks{
			CloudChanged: func(context.Context) error {
				for _, c := range []*octa{p, other} {
					c.cache.Invalidate()
					c.lbCache.Invalidate()
				}
				return nil
			},
			CreateInstance: func(_ context.Context, name string) (*v1.Node, error) {
				return octaNode(compute.addVM(name)), nil
			},
			StopInstance:      state(func(id string) error { return compute.setState(id, instances.StateStopped) }),
			StartInstance:     state(func(id string) error { return compute.setState(id, instances.StateRunning) }),
			TerminateInstance: state(compute.removeVM),
			Owned:             func(context.Context) ([]string, error) { return cloudAPI.objects(), nil },
			Writes:            cloudAPI.writeCalls,
			Outage: func() func() {
				cloudAPI.setDown(true)
				compute.setDown(true)
				return func() { cloudAPI.setDown(false); compute.setDown(false) }
			},
			Backends:     s.backends,
			Listeners:    s.listeners,
			HealthCheck:  s.healthCheck,
			SourceRanges: s.sourceRanges,
		},
	}, nil
}

// octaSandbox is what the hooks read octa's cloud with, past the SDK
// (uncounted): the tree of a Service's load balancer, and whose Node each
// member's address is.
type octaSandbox struct {
	api      *octaAPI
	compute  *acmeAPI
	cluster  string
	nodeName map[string]string // renamed Nodes, by provider ID
}

// tree returns the tree of svc's load balancer as cluster sees it: by its
// ownership tags (the provider's cluster ID, not the clusterName argument,
// which it ignores).
func (s *octaSandbox) tree(svc *v1.Service) (*octaLB, error) {
	lbs := s.api.inspect(loadbalancer.OwnerOf(s.cluster, svc).Selector())
	if len(lbs) != 1 {
		return nil, fmt.Errorf("%d load balancers for %s/%s in cluster %q; want 1", len(lbs), svc.Namespace, svc.Name, s.cluster)
	}
	return lbs[0], nil
}

// perPool returns f of each listener's pool (nil: none), which must agree:
// pools that differ are a load balancer not converged.
func perPool[T any](s *octaSandbox, svc *v1.Service, f func(*octaPool) (T, error)) (T, error) {
	var zero T
	t, err := s.tree(svc)
	if err != nil {
		return zero, err
	}
	var got []T
	for _, l := range t.Listeners {
		v, err := f(l.Pool)
		if err != nil {
			return zero, err
		}
		if len(got) > 0 && fmt.Sprint(v) != fmt.Sprint(got[0]) {
			return zero, fmt.Errorf("load balancer %s: pool of listener %d has %v, that of listener %d %v: not converged", t.ID, l.Port, v, t.Listeners[0].Port, got[0])
		}
		got = append(got, v)
	}
	if len(got) == 0 {
		return zero, nil
	}
	return got[0], nil
}

// backends are the Nodes of the members of every pool of svc's load
// balancer, by the Node whose InternalIP each member's address is.
func (s *octaSandbox) backends(_ context.Context, _ string, svc *v1.Service) ([]string, error) {
	return perPool(s, svc, func(p *octaPool) ([]string, error) {
		var names []string
		for _, m := range poolMembers(p) {
			vm, err := s.compute.vm(func(vm instances.Instance) bool {
				return slices.Contains(vm.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: m.Address.String()})
			})
			if err != nil {
				return nil, fmt.Errorf("member %s is no VM's address: %w", m.Address, err)
			}
			names = append(names, cmp.Or(s.nodeName["octa://"+vm.ID], vm.Name))
		}
		slices.Sort(names)
		return names, nil
	})
}

// poolMembers are p's members (none without a pool).
func poolMembers(p *octaPool) []octaMember {
	if p == nil {
		return nil
	}
	return p.Members
}

// healthCheck is the monitor of every pool of svc's load balancer.
func (s *octaSandbox) healthCheck(_ context.Context, _ string, svc *v1.Service) (conformance.HealthCheck, error) {
	return perPool(s, svc, func(p *octaPool) (conformance.HealthCheck, error) {
		if p == nil || p.Monitor == nil {
			return conformance.HealthCheck{}, nil
		}
		return conformance.HealthCheck{Port: p.Monitor.Port, Path: p.Monitor.Path}, nil
	})
}

// listeners are the listeners of svc's load balancer, each with the port
// of its pool's members.
func (s *octaSandbox) listeners(_ context.Context, _ string, svc *v1.Service) ([]conformance.Listener, error) {
	t, err := s.tree(svc)
	if err != nil {
		return nil, err
	}
	var out []conformance.Listener
	for _, l := range t.Listeners {
		var nodePort int32
		if ms := poolMembers(l.Pool); len(ms) > 0 {
			nodePort = ms[0].Port
		}
		out = append(out, conformance.Listener{Protocol: v1.ProtocolTCP, Port: l.Port, NodePort: nodePort})
	}
	return out, nil
}

// sourceRanges are the allowed CIDRs of svc's load balancer.
func (s *octaSandbox) sourceRanges(_ context.Context, _ string, svc *v1.Service) ([]string, error) {
	t, err := s.tree(svc)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range t.AllowedCIDRs {
		out = append(out, p.String())
	}
	return out, nil
}

// inspect returns the trees of the load balancers with every tag of tags,
// past the API: not counted, never down.
func (a *octaAPI) inspect(tags map[string]string) []*octaLB {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*octaLB
	for _, lb := range a.lbs {
		if matches(lb.Tags, tags) {
			out = append(out, decoded(lb))
		}
	}
	return out
}

// objects returns the ID of every object in the cloud: load balancers,
// listeners, pools, members and monitors.
func (a *octaAPI) objects() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, lb := range a.lbs {
		out = append(out, lb.ID)
		for _, l := range lb.Listeners {
			out = append(out, l.ID)
			if p := l.Pool; p != nil {
				out = append(out, p.ID)
				for _, m := range p.Members {
					out = append(out, m.ID)
				}
				if p.Monitor != nil {
					out = append(out, p.Monitor.ID)
				}
			}
		}
	}
	return out
}

// writeCalls returns how many write calls were made, whatever their
// answer.
func (a *octaAPI) writeCalls() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var n int64
	for kind, c := range a.calls {
		if !strings.HasPrefix(kind, "GET ") && kind != "409" {
			n += int64(c)
		}
	}
	return n
}

func (a *octaAPI) setDown(down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = down
}

// TestHierarchicalIsRealistic pins what makes the sandbox an Octavia-like
// cloud, so that the suite's verdict above means something: a write while
// the load balancer is busy is a 409, a listener's port is kept, a pool's
// members are replaced in one call, and a delete cascades.
func TestHierarchicalIsRealistic(t *testing.T) {
	clk := newSimClock()
	c := newOctaAPI(clk, time.Second)
	lb, err := c.CreateLoadBalancer("lb", map[string]string{"k": "v"}, v1.IPv4Protocol, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateListener(lb.ID, 80, "TCP", ""); octaStatus(err) != http.StatusConflict {
		t.Errorf("a listener while PENDING_CREATE: %v; want a 409", err)
	}
	clk.Step(time.Second)
	l, err := c.CreateListener(lb.ID, 80, "TCP", "")
	if err != nil {
		t.Fatalf("a listener once ACTIVE: %v", err)
	}
	clk.Step(time.Second)
	if _, err := c.CreateListener(lb.ID, 80, "HTTP", ""); octaStatus(err) != http.StatusBadRequest {
		t.Errorf("a second listener on port 80: %v; want a 400", err)
	}
	p, err := c.CreatePool(l)
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	ms := []octaMember{{Address: netip.MustParseAddr("10.0.0.1"), Port: 30080}, {Address: netip.MustParseAddr("10.0.0.2"), Port: 30080}}
	if err := c.ReplaceMembers(p, ms); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	if err := c.DeleteLoadBalancer(lb.ID); err != nil {
		t.Fatal(err)
	}
	if got := len(c.objects()); got != 5 {
		t.Errorf("%d objects while PENDING_DELETE; want 5: the load balancer, a listener, a pool, two members", got)
	}
	clk.Step(time.Second)
	if _, err := c.Tree(lb.ID); octaStatus(err) != http.StatusNotFound {
		t.Errorf("the tree after the delete: %v; want a 404", err)
	}
	if got := c.objects(); len(got) != 0 {
		t.Errorf("objects after a cascade delete: %v; want none", got)
	}
}

// octaBringUp is one measured bring-up of octaFigures.
type octaBringUp struct {
	ensures, writes, refused int
	reads                    map[string]int // by kind
}

// TestOctaCallFigures counts the SDK calls of a bring-up of 5 Services
// with 2 ports each, on 10 Nodes, through the Reconciler directly
// (EnsureLoadBalancer made again after each RetryError's delay, as the
// service controller does), on simulated time: octa as composed (over
// loadbalancer.Cache), the Reconciler over the bare Driver, and the bare
// Driver re-reading the tree after every write, the pattern of issue 25's
// "331 reads against 15". Each load balancer is 1 + 4 per port writes
// whatever the composition; the cache reads once per new Service, the
// bare Driver once (a list and a tree) per Ensure. The README states the
// figures; this test checks them.
func TestOctaCallFigures(t *testing.T) {
	const nodes, services, ports = 10, 5, 2
	wantWrites := services * (1 + 4*ports)
	cached := octaBringUpOf(t, nodes, services, func(s *octaSim) cloudprovider.LoadBalancer { lbs, _ := s.p.LoadBalancer(); return lbs })
	bare := octaBringUpOf(t, nodes, services, func(s *octaSim) cloudprovider.LoadBalancer {
		return s.reconciler(t, octaDriver{s.api})
	})
	reread := octaBringUpOf(t, nodes, services, func(s *octaSim) cloudprovider.LoadBalancer {
		return s.reconciler(t, rereadingDriver{octaDriver{s.api}})
	})
	for _, tc := range []struct {
		name string
		got  octaBringUp
	}{{"octa (loadbalancer.Cache)", cached}, {"bare Driver", bare}, {"bare Driver, tree re-read after each write", reread}} {
		t.Logf("%s: %d EnsureLoadBalancer calls, %d writes (%d refused), reads %v", tc.name, tc.got.ensures, tc.got.writes, tc.got.refused, tc.got.reads)
		if tc.got.writes != wantWrites || tc.got.refused != 0 {
			t.Errorf("%s: %d writes, %d refused; want %d (1 + 4 per port per load balancer), none refused", tc.name, tc.got.writes, tc.got.refused, wantWrites)
		}
	}
	if bare.reads["GET /loadbalancers/{id}/tree"] > bare.ensures {
		t.Errorf("bare Driver: %d tree reads for %d Ensures; want at most one each", bare.reads["GET /loadbalancers/{id}/tree"], bare.ensures)
	}
	port, certChange := octaChanges(t)
	text := octaREADME(t)
	for _, f := range []struct {
		what, pattern string
		want          []int
	}{
		{"bring-up", `(\d+) Services of (\d+) ports on (\d+) Nodes: (\d+) writes, (\d+) reads in all`, []int{services, ports, nodes, cached.writes, total(cached.reads)}},
		{"bring-up without the cache", `without the cache, (\d+) reads \((\d+) tree reads for (\d+) EnsureLoadBalancer calls, and (\d+) lists`,
			[]int{total(bare.reads), bare.reads["GET /loadbalancers/{id}/tree"], bare.ensures, bare.reads["GET /loadbalancers"]}},
		{"re-reading", `re-reading the tree after each write,[^,]*, (\d+) reads`, []int{total(reread.reads)}},
		{"port change", `a port change is (\d+) writes`, []int{port}},
		{"certificate change", `a certificate change on one port (\d+) write`, []int{certChange}},
	} {
		m := regexp.MustCompile(f.pattern).FindStringSubmatch(text)
		if m == nil {
			t.Errorf("the README's octa subsection states no %s figure (%s)", f.what, f.pattern)
			continue
		}
		var got []int
		for _, s := range m[1:] {
			n, _ := strconv.Atoi(s)
			got = append(got, n)
		}
		if !slices.Equal(got, f.want) {
			t.Errorf("the README's %s figures are %v; measured %v", f.what, got, f.want)
		}
	}
}

// total is the sum of the counts of reads.
func total(reads map[string]int) int {
	n := 0
	for _, c := range reads {
		n += c
	}
	return n
}

// octaSim is octa on simulated time, over VMs and their Nodes.
type octaSim struct {
	clk   simClock
	api   *octaAPI
	p     *octa
	nodes []*v1.Node
}

// newOctaSim returns octa over an empty octa cloud and n VMs.
func newOctaSim(t *testing.T, n int) *octaSim {
	t.Helper()
	s := &octaSim{clk: newSimClock()}
	s.api = newOctaAPI(s.clk, octaPending)
	compute := &acmeAPI{}
	for range n {
		s.nodes = append(s.nodes, octaNode(compute.addVM("")))
	}
	p, err := newOcta(&Config{ClusterID: "sim"}, s.api, compute, s.clk)
	if err != nil {
		t.Fatal(err)
	}
	s.p = p
	return s
}

// reconciler is octa's Reconciler over d instead of its cache.
func (s *octaSim) reconciler(t *testing.T, d loadbalancer.Driver) *loadbalancer.Reconciler {
	t.Helper()
	nodes, _ := s.p.InstancesV2()
	r, err := loadbalancer.NewReconciler(d, octaOptions(&Config{ClusterID: "sim"}, nodes, s.clk))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ensure calls EnsureLoadBalancer of lbs (nil: octa's) as the service
// controller does, again after each RetryError once its delay has passed
// on simulated time, and returns the number of calls; any other error
// fails t.
func (s *octaSim) ensure(t *testing.T, lbs cloudprovider.LoadBalancer, svc *v1.Service) int {
	t.Helper()
	if lbs == nil {
		lbs, _ = s.p.LoadBalancer()
	}
	for calls := 1; calls <= 20; calls++ {
		_, err := lbs.EnsureLoadBalancer(t.Context(), "kubernetes", svc, s.nodes)
		var retry *api.RetryError
		switch {
		case err == nil:
			return calls
		case !errors.As(err, &retry):
			t.Fatalf("EnsureLoadBalancer(%s) #%d: %v", svc.Name, calls, err)
		}
		s.clk.Step(retry.RetryAfter())
	}
	t.Fatalf("EnsureLoadBalancer(%s) did not converge in 20 calls", svc.Name)
	return 0
}

// octaBringUpOf brings up services Services of two ports on nodes Nodes
// through the LoadBalancer lbOf makes of a new octaSim, and counts the
// calls.
func octaBringUpOf(t *testing.T, nodes, services int, lbOf func(*octaSim) cloudprovider.LoadBalancer) octaBringUp {
	t.Helper()
	s := newOctaSim(t, nodes)
	lbs := lbOf(s)
	var out octaBringUp
	for i := range services {
		out.ensures += s.ensure(t, lbs, octaService(strconv.Itoa(i)))
	}
	out.reads = map[string]int{}
	s.api.mu.Lock()
	defer s.api.mu.Unlock()
	for kind, n := range s.api.calls {
		switch {
		case kind == "409":
			out.refused = n
		case strings.HasPrefix(kind, "GET "):
			out.reads[kind] = n
		default:
			out.writes += n
		}
	}
	out.writes -= out.refused
	return out
}

// octaChanges counts the writes of a port change and of a certificate
// change on one port of a Service, each on a calm cloud.
func octaChanges(t *testing.T) (port, certChange int) {
	s := newOctaSim(t, 2)
	svc := octaService("web")
	s.ensure(t, nil, svc)
	writes := func() int {
		s.clk.Step(time.Minute) // a calm cloud
		_, n := s.api.takeCounts()
		return n
	}
	writes()
	svc.Spec.Ports[1].Port = 8443
	s.ensure(t, nil, svc)
	port = writes()
	svc.Annotations[octaCertificate.Name] = "https=cert-2"
	s.ensure(t, nil, svc)
	return port, writes()
}

// rereadingDriver is octaDriver answering every write with the load
// balancer read again (a tree read), as a Driver had to before the
// Reconciler derived results.
type rereadingDriver struct{ octaDriver }

func (d rereadingDriver) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	lb, err := d.octaDriver.Apply(ctx, a)
	var b *loadbalancer.BusyError
	applied := err == nil || (errors.As(err, &b) && !errors.Is(err, loadbalancer.ErrRefused))
	if lb != nil || !applied {
		return lb, err
	}
	lbs, ferr := d.Find(ctx, loadbalancer.Query{ID: a.LoadBalancerID})
	if ferr != nil || len(lbs) != 1 {
		return nil, cmp.Or(ferr, fmt.Errorf("load balancer %s is gone", a.LoadBalancerID))
	}
	return lbs[0], err
}

// TestOctaUpdateListener pins the writes of a changed listener: octa
// keeps the node port on the pool's members and the protocol and
// certificate on the listener, so a change of both is two writes, the
// members first, each once.
func TestOctaUpdateListener(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		change       func(*v1.Service)
		want         []string
	}{
		{name: "node port", reason: "the members carry it: one batch write",
			change: func(s *v1.Service) { s.Spec.Ports[1].NodePort = 31443 },
			want:   []string{"PUT /pools/pool-8/members 10.0.0.1:31443 10.0.0.2:31443"}},
		{name: "certificate", reason: "the listener carries it: one write",
			change: func(s *v1.Service) { s.Annotations[octaCertificate.Name] = "https=cert-2" },
			want:   []string{"PUT /listeners/listener-3 TERMINATED_HTTPS, cert cert-2"}},
		{name: "certificate removed", reason: "https without a certificate is passed through: one write",
			change: func(s *v1.Service) { delete(s.Annotations, octaCertificate.Name) },
			want:   []string{"PUT /listeners/listener-3 HTTPS"}},
		{name: "app protocol", reason: "the listener's protocol: one write",
			change: func(s *v1.Service) { s.Spec.Ports[0].AppProtocol = nil },
			want:   []string{"PUT /listeners/listener-2 TCP"}},
		{name: "node port and certificate", reason: "two objects: the members, then (planned again from the Driver's answer) the listener",
			change: func(s *v1.Service) {
				s.Spec.Ports[1].NodePort = 31443
				s.Annotations[octaCertificate.Name] = "https=cert-2"
			},
			want: []string{"PUT /pools/pool-8/members 10.0.0.1:31443 10.0.0.2:31443", "PUT /listeners/listener-3 TERMINATED_HTTPS, cert cert-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newOctaSim(t, 2)
			svc := octaService("web")
			s.ensure(t, nil, svc)
			s.api.takeLog()
			tc.change(svc)
			s.ensure(t, nil, svc)
			if got := s.api.takeLog(); !slices.Equal(got, tc.want) {
				t.Errorf("writes %q; want %q (%s)", got, tc.want, tc.reason)
			}
			s.ensure(t, nil, svc)
			if got := s.api.takeLog(); len(got) != 0 {
				t.Errorf("an Ensure after the change wrote %q; want nothing: converged", got)
			}
		})
	}
}
