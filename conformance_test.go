package ccmkit_test

// The conformance suite against the README's walkthrough provider: newAcme,
// exactly as Example_yourOwnProvider builds it (instances.Cache and
// loadbalancer.Cache with their default one-minute TTL, a Reconciler that
// never waits for provisioning),
// over a sandbox acme cloud whose VM IDs are not its Node names, whose load
// balancers provision asynchronously and keep VM IDs as targets.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/internal/readme"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// TestWalkthroughConformance: the walkthrough provider passes the suite
// with production settings. The caches' one-minute TTL is honoured through
// Hooks.CloudChanged (a provider drops its caches when its cloud reports a
// change); asynchronous provisioning through the suite's RetryError
// retries, as the service controller does.
func TestWalkthroughConformance(t *testing.T) {
	t.Parallel() // mostly waits for provisioning and controller periods: beside the other suites
	outs := conformance.Run(t, conformance.Config{
		ProviderName:   "acme",
		CloudConfig:    "clusterID: conformance\nendpoint: https://api.acme\ntoken: t0k3n\n",
		BadCloudConfig: "endpoint: https://api.acme\n", // no clusterID: Validate rejects it
		Claims:         conformance.Claims{LoadBalancer: true, InstancesV2: true, Routes: true, UDP: true, SourceRanges: true, SourceRangesAnnotation: true},
		NewTarget:      newAcmeSandbox,
	})
	readme.CheckPasses(t, readme.Section(t, "README.md", "Run the conformance tests against your provider"), "the walkthrough provider", outs)
}

// newAcmeSandbox builds an acme cloud with four VMs (IDs i-N, names
// worker-N), the walkthrough provider over it as cluster "conformance" and,
// as Target.OtherCluster, as cluster "conformance-other". The Node of the
// fourth VM is named unlike it (Target.RenamedNodes).
func newAcmeSandbox(context.Context) (*conformance.Target, error) {
	api := &acmeAPI{lbs: map[string]*loadbalancer.LoadBalancer{}}
	for range 4 {
		api.addVM("")
	}
	const cluster = "conformance"
	p, err := newAcme(&Config{ClusterID: cluster}, api)
	if err != nil {
		return nil, err
	}
	other, err := newAcme(&Config{ClusterID: cluster + "-other"}, api)
	if err != nil {
		return nil, err
	}
	var nodes []*v1.Node
	vms, _ := api.vms()
	for _, vm := range vms {
		nodes = append(nodes, acmeNode(vm))
	}
	// A kubelet run with --hostname-override and --provider-id.
	renamed := nodes[len(nodes)-1:]
	nodes = nodes[:len(nodes)-1]
	nodeName := map[string]string{renamed[0].Spec.ProviderID: "edge-gateway"} // by provider ID
	renamed[0].Name = "edge-gateway"
	// lbOf finds the load balancer of svc as cluster sees it: by the
	// ownership tags (the provider's cluster ID, not the clusterName
	// argument, which it ignores).
	lbOf := func(svc *v1.Service) (*loadbalancer.LoadBalancer, error) {
		tags := loadbalancer.OwnerOf(cluster, svc).Selector()
		lbs, err := lbDriver{api}.Find(context.Background(), loadbalancer.Query{Tags: tags})
		if err != nil {
			return nil, err
		}
		if len(lbs) != 1 {
			return nil, fmt.Errorf("%d load balancers for %s/%s in cluster %q; want 1", len(lbs), svc.Namespace, svc.Name, cluster)
		}
		return lbs[0], nil
	}
	state := func(change func(id string) error) func(context.Context, *v1.Node) error {
		return func(_ context.Context, n *v1.Node) error {
			return change(strings.TrimPrefix(n.Spec.ProviderID, "acme://"))
		}
	}
	return &conformance.Target{
		Cloud:        p,
		OtherCluster: other,
		Nodes:        nodes,
		RenamedNodes: renamed,
		Hooks: conformance.Hooks{
			CloudChanged: func(context.Context) error {
				for _, c := range []*acme{p, other} {
					c.cache.Invalidate()
					c.lbCache.Invalidate()
				}
				return nil
			},
			CreateInstance: func(_ context.Context, name string) (*v1.Node, error) {
				return acmeNode(api.addVM(name)), nil
			},
			StopInstance:      state(func(id string) error { return api.setState(id, instances.StateStopped) }),
			StartInstance:     state(func(id string) error { return api.setState(id, instances.StateRunning) }),
			TerminateInstance: state(api.removeVM),
			Owned: func(context.Context) ([]string, error) {
				api.mu.Lock()
				defer api.mu.Unlock()
				var out []string
				for id := range api.lbs {
					out = append(out, "loadbalancer/"+id)
				}
				for _, e := range api.table {
					out = append(out, "route/"+e.Cluster+"/"+e.Name)
				}
				return out, nil
			},
			Writes: func() int64 {
				api.mu.Lock()
				defer api.mu.Unlock()
				return api.writes
			},
			Outage: func() func() {
				api.setDown(true)
				return func() { api.setDown(false) }
			},
			Backends: func(_ context.Context, _ string, svc *v1.Service) ([]string, error) {
				lb, err := lbOf(svc)
				if err != nil {
					return nil, err
				}
				var out []string
				for _, b := range lb.Spec.Backends { // VM IDs: the hook maps them to Node names
					vm, err := api.vm(func(vm instances.Instance) bool { return "acme://"+vm.ID == b.ProviderID })
					if err != nil {
						return nil, fmt.Errorf("load balancer %s targets %q: %w", lb.ID, b.ProviderID, err)
					}
					out = append(out, cmp.Or(nodeName[b.ProviderID], vm.Name))
				}
				return out, nil
			},
			Listeners: func(_ context.Context, _ string, svc *v1.Service) ([]conformance.Listener, error) {
				lb, err := lbOf(svc)
				if err != nil {
					return nil, err
				}
				var out []conformance.Listener
				for _, l := range lb.Spec.Listeners {
					out = append(out, conformance.Listener{Protocol: l.Protocol, Port: l.Port, NodePort: l.NodePort})
				}
				return out, nil
			},
			SourceRanges: func(_ context.Context, _ string, svc *v1.Service) ([]string, error) {
				lb, err := lbOf(svc)
				if err != nil {
					return nil, err
				}
				var out []string
				for _, r := range lb.Spec.SourceRanges {
					out = append(out, r.String())
				}
				return out, nil
			},
			HealthCheck: func(_ context.Context, _ string, svc *v1.Service) (conformance.HealthCheck, error) {
				lb, err := lbOf(svc)
				if err != nil {
					return conformance.HealthCheck{}, err
				}
				return conformance.HealthCheck{Port: lb.Spec.HealthCheck.Port, Path: lb.Spec.HealthCheck.Path}, nil
			},
		},
	}, nil
}

// acmeNode is the Node of vm as the cloud-node controller leaves it:
// provider ID, addresses and a UID (route names are made from it).
func acmeNode(vm instances.Instance) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: vm.Name, UID: types.UID("uid-" + vm.ID)},
		Spec:       v1.NodeSpec{ProviderID: "acme://" + vm.ID},
		Status:     v1.NodeStatus{Addresses: slices.Clone(vm.Addresses)},
	}
}

// addVM creates a running VM named name (worker-<n> when empty) with ID
// i-<n> and the next address, and returns it.
func (a *acmeAPI) addVM(name string) instances.Instance {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.machine) + 1
	for slices.ContainsFunc(a.machine, func(vm instances.Instance) bool { return vm.ID == "i-"+strconv.Itoa(n) }) {
		n++
	}
	if name == "" {
		name = "worker-" + strconv.Itoa(n)
	}
	vm := instances.Instance{
		ID: "i-" + strconv.Itoa(n), Name: name, Type: "m1", Zone: "zone-a", Region: "eu-1",
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0." + strconv.Itoa(n)}, {Type: v1.NodeHostName, Address: name}},
	}
	a.machine = append(a.machine, vm)
	return vm
}

// setState moves VM id to state.
func (a *acmeAPI) setState(id string, state instances.State) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := slices.IndexFunc(a.machine, func(vm instances.Instance) bool { return vm.ID == id })
	if i < 0 {
		return fmt.Errorf("acme: no VM %q", id)
	}
	a.machine[i].State = state
	return nil
}

// removeVM deletes VM id for good.
func (a *acmeAPI) removeVM(id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.machine)
	a.machine = slices.DeleteFunc(a.machine, func(vm instances.Instance) bool { return vm.ID == id })
	if len(a.machine) == n {
		return fmt.Errorf("acme: no VM %q", id)
	}
	return nil
}

func (a *acmeAPI) setDown(down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = down
}

// TestWalkthroughIsRealistic pins what makes the sandbox a realistic cloud,
// so that the suite's verdict above means something: the first Ensure of a
// Service is an api.RetryError (provisioning), and its targets are VM IDs.
func TestWalkthroughIsRealistic(t *testing.T) {
	tgt, err := newAcmeSandbox(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lbs, _ := tgt.Cloud.LoadBalancer()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "u1"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}}},
	}
	if _, err := lbs.EnsureLoadBalancer(t.Context(), "kubernetes", svc, tgt.Nodes); err == nil || !strings.Contains(err.Error(), "no address yet") {
		t.Errorf("first Ensure: %v; want the provisioning RetryError", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := lbs.EnsureLoadBalancer(t.Context(), "kubernetes", svc, tgt.Nodes)
		if err == nil && len(st.Ingress) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ensure after provisioning: %v, %v", st, err)
		}
	}
	names, err := tgt.Hooks.Backends(t.Context(), "kubernetes", svc)
	if err != nil || len(names) != 3 {
		t.Errorf("backends = %v, %v; want the 3 workers", names, err)
	}
	if len(tgt.RenamedNodes) == 0 {
		t.Errorf("no Target.RenamedNodes; the sandbox must have a Node named unlike its VM")
	}
	for _, n := range slices.Concat(tgt.Nodes, tgt.RenamedNodes) {
		if strings.TrimPrefix(n.Spec.ProviderID, "acme://") == n.Name {
			t.Errorf("node %s has the name of its VM; the sandbox must tell them apart", n.Name)
		}
	}
}

// TestWalkthroughDefaultStaleness: the walkthrough provider with its
// caches at their one-minute defaults, with neither Hooks.CloudChanged nor
// Config.MaxStaleness, passes the rules that watch an instance change
// through those caches: the suite learns the staleness from the provider
// (provider.Staleness), as issue 26 asks. Each rule waits out up to a
// minute of cache (about 60 s each, mostly asleep), so each runs alone, in
// parallel with the others and the package's other tests.
func TestWalkthroughDefaultStaleness(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the caches' one-minute TTL")
	}
	t.Parallel()
	for _, id := range []string{"INST-TERMINATED", "INST-STOPPED", "CTRL-NODE-TERMINATED", "CTRL-NODE-SHUTDOWN"} {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			skip := map[string]string{}
			for _, r := range conformance.Rules() {
				if r.ID != id {
					skip[r.ID] = "TestWalkthroughConformance runs it"
				}
			}
			outs := conformance.Run(t, conformance.Config{
				Claims: conformance.Claims{LoadBalancer: true, InstancesV2: true, Routes: true, UDP: true, SourceRanges: true, SourceRangesAnnotation: true},
				NewTarget: func(ctx context.Context) (*conformance.Target, error) {
					tgt, err := newAcmeSandbox(ctx)
					if err != nil {
						return nil, err
					}
					tgt.Hooks.CloudChanged = nil // only the TTL tells the provider of a change
					return tgt, nil
				},
				Skip: skip,
			})
			for _, o := range outs {
				if o.Rule == id && o.Status != conformance.Passed {
					t.Errorf("%s: %s at the caches' default TTL with no CloudChanged, expected pass: %v%s", o.Rule, o.Status, o.Messages, o.SkipReason)
				}
			}
		})
	}
}
