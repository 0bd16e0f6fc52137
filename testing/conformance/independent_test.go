package conformance_test

// This file holds "indie", a cloud provider written independently of
// ccmkit's building blocks (no loadbalancer, routes, instances, provider or
// fake import), straight from the k8s.io/cloud-provider v0.37.2 interfaces
// and the upstream controllers that call them, over an in-memory cloud of
// its own. The conformance suite must pass it with production settings
// (issue 12, "0 false positives"): a failure here is a rule stricter than
// upstream, or a bug in indie, never something to paper over.
//
// The cloud is what a provider team gets from its IaaS: VMs whose IDs are not
// their names, load balancers that take a while to get an address, tags, one
// route table, an outage now and then. Everything named indie* below is that
// team's code, except indieCloud's unexported admin methods and
// indieSandbox, which are the test project the suite's hooks reach into.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	servicehelpers "k8s.io/cloud-provider/service/helpers"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ccmkit/ccmkit/testing/conformance"
)

// ---------------------------------------------------------------------------
// The cloud ("SDK"): an in-memory IaaS, safe for concurrent use.

// VM states.
const (
	indieRunning    = "running"
	indieStopped    = "stopped"
	indieTerminated = "terminated" // terminal; still listed, as real clouds do for a while
)

// Errors of the cloud API, wrapped by every call that returns them.
var (
	errIndieNotFound    = errors.New("not found")
	errIndieConflict    = errors.New("already exists")
	errIndieUnavailable = errors.New("503 service unavailable")
)

// indieVM is a virtual machine. ID is assigned by the cloud; Name is the
// machine's hostname, which its kubelet registers as the Node name.
type indieVM struct {
	ID, Name, Type, Zone, State string
	PrivateIP, PublicIP         string // PublicIP may be empty
}

// indieListener forwards Protocol traffic on Port to TargetPort of every
// target VM.
type indieListener struct {
	Protocol   string // "TCP" or "UDP"
	Port       int32
	TargetPort int32
}

// indieHealthCheck probes every target: an HTTP GET of Path on Port.
type indieHealthCheck struct {
	Port int32
	Path string
}

// indieLBSpec is what a load balancer is asked to be.
type indieLBSpec struct {
	Name         string
	Tags         map[string]string
	Listeners    []indieListener
	Targets      []string // VM IDs
	HealthCheck  indieHealthCheck
	SourceRanges []string // CIDRs allowed to connect
}

func (s indieLBSpec) clone() indieLBSpec {
	s.Tags = maps.Clone(s.Tags)
	s.Listeners = slices.Clone(s.Listeners)
	s.Targets = slices.Clone(s.Targets)
	s.SourceRanges = slices.Clone(s.SourceRanges)
	return s
}

// equal compares canonical specs (sorted slices).
func (s indieLBSpec) equal(o indieLBSpec) bool {
	return s.Name == o.Name && maps.Equal(s.Tags, o.Tags) && slices.Equal(s.Listeners, o.Listeners) &&
		slices.Equal(s.Targets, o.Targets) && s.HealthCheck == o.HealthCheck && slices.Equal(s.SourceRanges, o.SourceRanges)
}

// indieLB is a load balancer. Address is empty while it provisions.
type indieLB struct {
	ID, Address string
	Spec        indieLBSpec
}

// indieRoute is an entry of the route table. Blackhole is set by the cloud
// when TargetVM is gone.
type indieRoute struct {
	Name, Destination, TargetVM string
	Tags                        map[string]string
	Blackhole                   bool
}

// indieCloud is the state of one project. A new load balancer has no address
// for its first provisionReads listings (and in the create response). Its
// API is reached through an indieClient; its unexported admin methods are
// the test project's back door and bypass outages and counters.
type indieCloud struct {
	provisionReads int

	mu      sync.Mutex
	vms     map[string]*indieVM
	lbs     map[string]*indieLB
	pending map[string]int // LB ID: listings left without an address
	routes  map[string]*indieRoute
	outage  bool
	seq     int
}

func newIndieCloud(provisionReads int) *indieCloud {
	return &indieCloud{provisionReads: provisionReads, vms: map[string]*indieVM{}, lbs: map[string]*indieLB{},
		pending: map[string]int{}, routes: map[string]*indieRoute{}}
}

// indieClient is one API client of the cloud, counting its calls.
type indieClient struct {
	cloud                  *indieCloud
	reads, writes, vmLists atomic.Int64
}

func (c *indieCloud) client() *indieClient { return &indieClient{cloud: c} }

// do runs one API call under the cloud's lock: it fails on a done ctx or an
// outage, and wraps f's error with the operation name.
func (k *indieClient) do(ctx context.Context, op string, write bool, f func(c *indieCloud) error) error {
	k.cloud.mu.Lock()
	defer k.cloud.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("indie API %s: %w", op, err)
	}
	if k.cloud.outage {
		return fmt.Errorf("indie API %s: %w", op, errIndieUnavailable)
	}
	if write {
		k.writes.Add(1)
	} else {
		k.reads.Add(1)
	}
	if err := f(k.cloud); err != nil {
		return fmt.Errorf("indie API %s: %w", op, err)
	}
	return nil
}

// ListVMs lists every VM of the project, terminated ones included, by ID.
func (k *indieClient) ListVMs(ctx context.Context) ([]indieVM, error) {
	var out []indieVM
	err := k.do(ctx, "ListVMs", false, func(c *indieCloud) error {
		k.vmLists.Add(1)
		for _, vm := range c.vms {
			out = append(out, *vm)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b indieVM) int { return strings.Compare(a.ID, b.ID) })
	return out, err
}

// ListLoadBalancers returns the load balancers carrying every tag of tags.
func (k *indieClient) ListLoadBalancers(ctx context.Context, tags map[string]string) ([]indieLB, error) {
	var out []indieLB
	err := k.do(ctx, "ListLoadBalancers", false, func(c *indieCloud) error {
		out = c.tagged(tags, true)
		return nil
	})
	return out, err
}

// tagged returns copies of the load balancers carrying every tag of tags,
// counting a listing of each (provision) when listing is true. The caller
// holds c.mu.
func (c *indieCloud) tagged(tags map[string]string, listing bool) []indieLB {
	var out []indieLB
	for _, lb := range c.lbs {
		if hasIndieTags(lb.Spec.Tags, tags) {
			if listing {
				c.provision(lb)
			}
			out = append(out, indieLB{ID: lb.ID, Address: lb.Address, Spec: lb.Spec.clone()})
		}
	}
	return out
}

// provision counts one listing of lb and gives it an address once it has
// been listed provisionReads times. The caller holds c.mu.
func (c *indieCloud) provision(lb *indieLB) {
	if lb.Address != "" {
		return
	}
	if c.pending[lb.ID] > 0 {
		c.pending[lb.ID]--
		return
	}
	c.seq++
	lb.Address = netip.AddrFrom4([4]byte{198, 18, byte(c.seq >> 8), byte(c.seq)}).String() //nolint:gosec // G115: the low bytes of the sequence number, truncated on purpose
}

// CreateLoadBalancer creates a load balancer; the response has no address
// yet (see indieCloud.provision).
func (k *indieClient) CreateLoadBalancer(ctx context.Context, spec indieLBSpec) (indieLB, error) {
	var out indieLB
	err := k.do(ctx, "CreateLoadBalancer", true, func(c *indieCloud) error {
		c.seq++
		lb := &indieLB{ID: fmt.Sprintf("lb-%04x", 0x5000+c.seq), Spec: spec.clone()}
		c.lbs[lb.ID], c.pending[lb.ID] = lb, c.provisionReads
		out = indieLB{ID: lb.ID, Spec: spec.clone()}
		return nil
	})
	return out, err
}

// ModifyLoadBalancer replaces the spec of load balancer id.
func (k *indieClient) ModifyLoadBalancer(ctx context.Context, id string, spec indieLBSpec) error {
	return k.modifyLB(ctx, "ModifyLoadBalancer", id, func(lb *indieLB) { lb.Spec = spec.clone() })
}

// SetTargets replaces the targets of load balancer id.
func (k *indieClient) SetTargets(ctx context.Context, id string, vmIDs []string) error {
	return k.modifyLB(ctx, "SetTargets", id, func(lb *indieLB) { lb.Spec.Targets = slices.Clone(vmIDs) })
}

func (k *indieClient) modifyLB(ctx context.Context, op, id string, f func(*indieLB)) error {
	return k.do(ctx, op, true, func(c *indieCloud) error {
		lb, ok := c.lbs[id]
		if !ok {
			return fmt.Errorf("load balancer %s: %w", id, errIndieNotFound)
		}
		f(lb)
		return nil
	})
}

// DeleteLoadBalancer deletes load balancer id; an unknown id wraps
// errIndieNotFound.
func (k *indieClient) DeleteLoadBalancer(ctx context.Context, id string) error {
	return k.do(ctx, "DeleteLoadBalancer", true, func(c *indieCloud) error {
		delete(c.pending, id)
		return removeIndie(c.lbs, "load balancer", id)
	})
}

// removeIndie deletes key, a what, from m; an unknown key wraps
// errIndieNotFound.
func removeIndie[V any](m map[string]V, what, key string) error {
	if _, ok := m[key]; !ok {
		return fmt.Errorf("%s %s: %w", what, key, errIndieNotFound)
	}
	delete(m, key)
	return nil
}

// ListRoutes lists the route table, by name.
func (k *indieClient) ListRoutes(ctx context.Context) ([]indieRoute, error) {
	var out []indieRoute
	err := k.do(ctx, "ListRoutes", false, func(c *indieCloud) error {
		out = c.routeList()
		return nil
	})
	return out, err
}

// routeList returns copies of the route table. The caller holds c.mu.
func (c *indieCloud) routeList() []indieRoute {
	var out []indieRoute
	for _, r := range c.routes {
		cp := *r
		cp.Tags = maps.Clone(r.Tags)
		vm, ok := c.vms[r.TargetVM]
		cp.Blackhole = !ok || vm.State == indieTerminated
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b indieRoute) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// CreateRoute adds r; a name in use wraps errIndieConflict.
func (k *indieClient) CreateRoute(ctx context.Context, r indieRoute) error {
	return k.do(ctx, "CreateRoute", true, func(c *indieCloud) error {
		if _, ok := c.routes[r.Name]; ok {
			return fmt.Errorf("route %s: %w", r.Name, errIndieConflict)
		}
		r.Tags = maps.Clone(r.Tags)
		c.routes[r.Name] = &r
		return nil
	})
}

// DeleteRoute deletes route name; an unknown name wraps errIndieNotFound.
func (k *indieClient) DeleteRoute(ctx context.Context, name string) error {
	return k.do(ctx, "DeleteRoute", true, func(c *indieCloud) error {
		return removeIndie(c.routes, "route", name)
	})
}

func hasIndieTags(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// addVM creates a running VM (admin). Empty ID, Type and PrivateIP are
// assigned.
func (c *indieCloud) addVM(vm indieVM) indieVM {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	if vm.ID == "" {
		vm.ID = fmt.Sprintf("vm-%04x", 0xa000+c.seq)
	}
	if vm.Type == "" {
		vm.Type = "std-2"
	}
	if vm.PrivateIP == "" {
		vm.PrivateIP = fmt.Sprintf("10.0.%d.%d", c.seq/250, 10+c.seq%250)
	}
	vm.State = indieRunning
	c.vms[vm.ID] = &vm
	return vm
}

// setState moves a VM to state (admin); a terminated VM stays terminated.
func (c *indieCloud) setState(id, state string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[id]
	switch {
	case !ok:
		return fmt.Errorf("VM %q: %w", id, errIndieNotFound)
	case vm.State == indieTerminated:
		return fmt.Errorf("VM %q is terminated, cannot make it %s", id, state)
	}
	vm.State = state
	return nil
}

// vm returns a VM by ID, and a live VM by name when id is empty (admin).
func (c *indieCloud) vm(id, name string) (indieVM, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, vm := range c.vms {
		if (id != "" && vm.ID == id) || (id == "" && vm.Name == name && vm.State != indieTerminated) {
			return *vm, true
		}
	}
	return indieVM{}, false
}

// lbsTagged lists load balancers by tags without provisioning them (admin).
func (c *indieCloud) lbsTagged(tags map[string]string) []indieLB {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tagged(tags, false)
}

func (c *indieCloud) setOutage(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outage = on
}

// ---------------------------------------------------------------------------
// The provider.

const (
	indieName   = "indie"
	indieScheme = indieName + "://"

	indieTagCluster = "indie.example.com/cluster"     // the cloud-config's clusterID
	indieTagUID     = "indie.example.com/service-uid" // the Service's UID
	indieTagService = "indie.example.com/service"     // namespace/name, for humans
	indieTagNode    = "indie.example.com/node"        // a route's target Node name
	indieLabelVMID  = "indie.example.com/vm-id"

	// indieKubeProxyHealthPort is kube-proxy's --healthz-bind-address port:
	// with externalTrafficPolicy Cluster, upstream leaves the health check to
	// the provider (service/helpers/helper.go GetServiceHealthCheckPathPort
	// returns no port), and kube-proxy's /healthz there reports whether the
	// node forwards at all (KEP-3836).
	indieKubeProxyHealthPort = 10256
)

// indieConfig is the --cloud-config, JSON.
type indieConfig struct {
	// ClusterID tags everything this cluster creates: two clusters must
	// have different IDs, whatever their --cluster-name.
	ClusterID string `json:"clusterID"`
	// Region is the region of the cloud's VMs.
	Region string `json:"region"`
}

func (c indieConfig) validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(c.ClusterID); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("clusterID %q: %s, expected a DNS label naming this cluster, such as \"prod-eu\"", c.ClusterID, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Label(c.Region); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("region %q: %s, expected the region of the cluster's VMs, such as \"region-1\"", c.Region, strings.Join(msgs, "; ")))
	}
	return errors.Join(errs...)
}

// parseIndieConfig decodes and validates a cloud-config; r may be nil (no
// --cloud-config, plugins.go InitCloudProvider), which is an error.
func parseIndieConfig(r io.Reader) (indieConfig, error) {
	var c indieConfig
	if r == nil {
		return c, errors.New(`indie: no --cloud-config, expected JSON such as {"clusterID": "prod-eu", "region": "region-1"}`)
	}
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("indie: cloud-config: %w", err)
	}
	if err := c.validate(); err != nil {
		return c, fmt.Errorf("indie: cloud-config: %w", err)
	}
	return c, nil
}

// indieOptions tune the provider; the zero value is production.
type indieOptions struct {
	CacheTTL   time.Duration    // how long the VM list is trusted; 0 means 1m
	RetryAfter time.Duration    // when to ask again about a provisioning load balancer; 0 means 5s
	Now        func() time.Time // nil means time.Now
}

// indieProvider implements cloudprovider.Interface with LoadBalancer,
// InstancesV2 and Routes. It is safe for concurrent use.
type indieProvider struct {
	cfg    indieConfig
	opts   indieOptions
	sdk    *indieClient
	vms    *indieVMCache
	lbs    *indieLoadBalancers
	inst   indieInstances
	routes indieRoutes
}

var (
	_ cloudprovider.Interface    = (*indieProvider)(nil)
	_ cloudprovider.LoadBalancer = (*indieLoadBalancers)(nil)
	_ cloudprovider.InstancesV2  = indieInstances{}
	_ cloudprovider.Routes       = indieRoutes{}
)

func newIndieProvider(cfg indieConfig, sdk *indieClient, opts indieOptions) (*indieProvider, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("indie: %w", err)
	}
	if opts.CacheTTL < 0 || opts.RetryAfter < 0 {
		return nil, fmt.Errorf("indie: CacheTTL %v, RetryAfter %v: expected durations >= 0 (0 for the default)", opts.CacheTTL, opts.RetryAfter)
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = time.Minute
	}
	if opts.RetryAfter == 0 {
		opts.RetryAfter = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &indieProvider{cfg: cfg, opts: opts, sdk: sdk}
	p.vms = &indieVMCache{sdk: sdk, ttl: opts.CacheTTL, now: opts.Now}
	p.lbs = &indieLoadBalancers{p: p, locks: map[types.UID]*sync.Mutex{}}
	p.inst, p.routes = indieInstances{p}, indieRoutes{p}
	return p, nil
}

func init() {
	cloudprovider.RegisterCloudProvider(indieName, func(r io.Reader) (cloudprovider.Interface, error) {
		cfg, err := parseIndieConfig(r)
		if err != nil {
			return nil, err
		}
		// A real factory would dial the cloud's endpoint; indie's cloud lives
		// in memory, so every registered provider gets an empty one.
		p, err := newIndieProvider(cfg, newIndieCloud(1).client(), indieOptions{})
		if err != nil {
			return nil, err
		}
		return p, nil
	})
}

// The accessors: LoadBalancer, InstancesV2 and Routes; Instances, Zones and
// Clusters are absent, (nil, false) (cloud.go Interface).
func (p *indieProvider) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (p *indieProvider) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return p.lbs, true }
func (p *indieProvider) Instances() (cloudprovider.Instances, bool)                        { return nil, false }
func (p *indieProvider) InstancesV2() (cloudprovider.InstancesV2, bool)                    { return p.inst, true }
func (p *indieProvider) Zones() (cloudprovider.Zones, bool)                                { return nil, false }
func (p *indieProvider) Clusters() (cloudprovider.Clusters, bool)                          { return nil, false }
func (p *indieProvider) Routes() (cloudprovider.Routes, bool)                              { return p.routes, true }
func (p *indieProvider) ProviderName() string                                              { return indieName }
func (p *indieProvider) HasClusterID() bool                                                { return true }

// indieVMID returns the VM ID of an indie provider ID.
func indieVMID(providerID string) (string, error) {
	id, ok := strings.CutPrefix(providerID, indieScheme)
	if !ok || id == "" || strings.ContainsAny(id, "/ ") {
		return "", fmt.Errorf("provider ID %q is not indie's, expected %q followed by a VM ID", providerID, indieScheme)
	}
	return id, nil
}

// ---------------------------------------------------------------------------
// InstancesV2, over a cached VM list.

// indieVMCache answers from one ListVMs for TTL. It never concludes that a VM
// is gone from an old list: a miss asks the cloud again, because
// InstanceExists (false, nil) deletes the Node
// (controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes).
// Safe for concurrent use; calls wait for a refresh in progress.
type indieVMCache struct {
	sdk *indieClient
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	vms     []indieVM
	fetched time.Time // zero: nothing cached
}

// invalidate drops the cached list, as a cloud event would.
func (c *indieVMCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.vms, c.fetched = nil, time.Time{}
}

// get returns the VM with ID id or, when id is empty, the live VM named
// name (a terminated one if none is live). ok is false when the cloud has no
// such VM.
func (c *indieVMCache) get(ctx context.Context, id, name string) (vm indieVM, ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fresh := false
	if c.fetched.IsZero() || c.now().Sub(c.fetched) >= c.ttl {
		if err := c.refresh(ctx); err != nil {
			return indieVM{}, false, err
		}
		fresh = true
	}
	vm, ok, err = pickIndieVM(c.vms, id, name)
	if err == nil && !fresh && (!ok || vm.State == indieTerminated) {
		if err := c.refresh(ctx); err != nil {
			return indieVM{}, false, err
		}
		vm, ok, err = pickIndieVM(c.vms, id, name)
	}
	return vm, ok, err
}

func (c *indieVMCache) refresh(ctx context.Context) error {
	vms, err := c.sdk.ListVMs(ctx)
	if err != nil {
		return err
	}
	c.vms, c.fetched = vms, c.now()
	return nil
}

func pickIndieVM(vms []indieVM, id, name string) (indieVM, bool, error) {
	var live, dead []indieVM
	for _, vm := range vms {
		if (id != "" && vm.ID != id) || (id == "" && vm.Name != name) {
			continue
		}
		if vm.State == indieTerminated {
			dead = append(dead, vm)
		} else {
			live = append(live, vm)
		}
	}
	switch {
	case len(live) > 1:
		return indieVM{}, false, fmt.Errorf("%d live VMs are named %q, expected one (give the Node a spec.providerID)", len(live), name)
	case len(live) == 1:
		return live[0], true, nil
	case len(dead) > 0:
		return dead[0], true, nil
	}
	return indieVM{}, false, nil
}

// indieInstances implements cloudprovider.InstancesV2: a Node is its VM by
// spec.providerID, else by name (cloud.go InstancesV2.InstanceMetadata).
type indieInstances struct{ p *indieProvider }

func (i indieInstances) find(ctx context.Context, node *v1.Node) (indieVM, bool, error) {
	if node.Spec.ProviderID == "" {
		return i.p.vms.get(ctx, "", node.Name)
	}
	id, err := indieVMID(node.Spec.ProviderID)
	if err != nil {
		return indieVM{}, false, err
	}
	return i.p.vms.get(ctx, id, "")
}

// live returns node's VM unless it is gone, which is an error wrapping
// cloudprovider.InstanceNotFound (compared with errors.Is upstream:
// controllers/nodelifecycle/node_lifecycle_controller.go).
func (i indieInstances) live(ctx context.Context, node *v1.Node) (indieVM, error) {
	vm, ok, err := i.find(ctx, node)
	switch {
	case err != nil:
		return indieVM{}, fmt.Errorf("indie: node %s: %w", node.Name, err)
	case !ok || vm.State == indieTerminated:
		return indieVM{}, fmt.Errorf("indie: node %s (provider ID %q): %w", node.Name, node.Spec.ProviderID, cloudprovider.InstanceNotFound)
	}
	return vm, nil
}

// InstanceExists is true for running and stopped VMs (cloud.go
// Instances.InstanceExistsByProviderID), false only when the cloud says the
// VM is terminated or unknown, and an error whenever in doubt.
func (i indieInstances) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	vm, ok, err := i.find(ctx, node)
	if err != nil {
		return false, fmt.Errorf("indie: node %s: %w", node.Name, err)
	}
	return ok && vm.State != indieTerminated, nil
}

func (i indieInstances) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	vm, err := i.live(ctx, node)
	if err != nil {
		return false, err
	}
	return vm.State == indieStopped, nil
}

func (i indieInstances) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	vm, err := i.live(ctx, node)
	if err != nil {
		return nil, err
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:       indieScheme + vm.ID,
		InstanceType:     vm.Type,
		NodeAddresses:    indieAddresses(vm),
		Zone:             vm.Zone,
		Region:           i.p.cfg.Region,
		AdditionalLabels: map[string]string{indieLabelVMID: vm.ID},
	}, nil
}

// indieAddresses returns a VM's addresses, always in this order: the node
// controller rewrites the Node when they change
// (controllers/node/node_controller.go nodeAddressesChangeDetected).
func indieAddresses(vm indieVM) []v1.NodeAddress {
	out := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: vm.PrivateIP}}
	if vm.PublicIP != "" {
		out = append(out, v1.NodeAddress{Type: v1.NodeExternalIP, Address: vm.PublicIP})
	}
	return append(out, v1.NodeAddress{Type: v1.NodeHostName, Address: vm.Name})
}

// ---------------------------------------------------------------------------
// LoadBalancer.

// indieLoadBalancers implements cloudprovider.LoadBalancer. A Service's load
// balancer is the one tagged with the cluster ID and the Service UID; the
// clusterName argument is ignored (it is "kubernetes" almost everywhere).
// Calls for one Service are serialized: the service and node workers of
// controllers/service run concurrently.
type indieLoadBalancers struct {
	p     *indieProvider
	mu    sync.Mutex
	locks map[types.UID]*sync.Mutex
}

func (l *indieLoadBalancers) lock(uid types.UID) (unlock func()) {
	l.mu.Lock()
	m, ok := l.locks[uid]
	if !ok {
		m = new(sync.Mutex)
		l.locks[uid] = m
	}
	l.mu.Unlock()
	m.Lock()
	return m.Unlock
}

func (l *indieLoadBalancers) owner(svc *v1.Service) map[string]string {
	return map[string]string{indieTagCluster: l.p.cfg.ClusterID, indieTagUID: string(svc.UID)}
}

func (l *indieLoadBalancers) find(ctx context.Context, svc *v1.Service) (*indieLB, error) {
	lbs, err := l.p.sdk.ListLoadBalancers(ctx, l.owner(svc))
	switch {
	case err != nil:
		return nil, fmt.Errorf("indie: finding the load balancer of service %s/%s: %w", svc.Namespace, svc.Name, err)
	case len(lbs) > 1:
		return nil, fmt.Errorf("indie: %d load balancers are tagged for service %s/%s (uid %s) in cluster %q, expected at most one", len(lbs), svc.Namespace, svc.Name, svc.UID, l.p.cfg.ClusterID)
	case len(lbs) == 1:
		return &lbs[0], nil
	}
	return nil, nil
}

func (l *indieLoadBalancers) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return l.p.cfg.ClusterID + "-" + cloudprovider.DefaultLoadBalancerName(svc)
}

// GetLoadBalancer reports a provisioning load balancer as existing, with no
// ingress yet.
func (l *indieLoadBalancers) GetLoadBalancer(ctx context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	lb, err := l.find(ctx, svc)
	if err != nil || lb == nil {
		return nil, false, err
	}
	return indieStatus(*lb), true, nil
}

func indieStatus(lb indieLB) *v1.LoadBalancerStatus {
	if lb.Address == "" {
		return &v1.LoadBalancerStatus{}
	}
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: lb.Address}}}
}

// EnsureLoadBalancer creates or converges the load balancer, writing only
// what differs. While it has no address it returns an api.RetryError: the
// service controller asks again after RetryAfter (cloud.go
// LoadBalancer.EnsureLoadBalancer; controllers/service/controller.go
// processNextServiceItem).
func (l *indieLoadBalancers) EnsureLoadBalancer(ctx context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	want, err := l.desired(svc, nodes)
	if err != nil {
		return nil, err
	}
	defer l.lock(svc.UID)()
	lb, err := l.find(ctx, svc)
	if err != nil {
		return nil, err
	}
	switch {
	case lb == nil:
		created, err := l.p.sdk.CreateLoadBalancer(ctx, want)
		if err != nil {
			return nil, fmt.Errorf("indie: creating the load balancer of service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		lb = &created
	case !lb.Spec.equal(want):
		if err := l.p.sdk.ModifyLoadBalancer(ctx, lb.ID, want); err != nil {
			return nil, fmt.Errorf("indie: updating load balancer %s of service %s/%s: %w", lb.ID, svc.Namespace, svc.Name, err)
		}
	}
	if lb.Address == "" {
		return nil, api.NewRetryError(fmt.Sprintf("indie: load balancer %s of service %s/%s is provisioning", lb.ID, svc.Namespace, svc.Name), l.p.opts.RetryAfter)
	}
	return indieStatus(*lb), nil
}

// desired is the load balancer svc asks for, or an error naming what indie
// cannot build: protocols other than TCP and UDP, IPv6 or RequireDualStack
// (indie load balancers are IPv4), ports without a node port, a requested
// IP, client-IP affinity, malformed source ranges. PreferDualStack is served
// IPv4 only, as "prefer" allows.
func (l *indieLoadBalancers) desired(svc *v1.Service, nodes []*v1.Node) (indieLBSpec, error) {
	bad := func(format string, args ...any) (indieLBSpec, error) {
		return indieLBSpec{}, fmt.Errorf("indie: service %s/%s: "+format, append([]any{svc.Namespace, svc.Name}, args...)...)
	}
	switch {
	case len(svc.Spec.Ports) == 0:
		return bad("spec.ports is empty, expected at least one port")
	case svc.Spec.IPFamilyPolicy != nil && *svc.Spec.IPFamilyPolicy == v1.IPFamilyPolicyRequireDualStack:
		return bad("spec.ipFamilyPolicy is RequireDualStack, expected SingleStack or PreferDualStack: indie load balancers are IPv4 only")
	case len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] != v1.IPv4Protocol:
		return bad("spec.ipFamilies is %v, expected IPv4 first: indie load balancers are IPv4 only", svc.Spec.IPFamilies)
	case svc.Spec.LoadBalancerIP != "":
		return bad("spec.loadBalancerIP is %q, expected none: indie allocates load balancer addresses", svc.Spec.LoadBalancerIP)
	case svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP:
		return bad("spec.sessionAffinity is ClientIP, expected None: indie load balancers do not keep client affinity")
	}
	var ls []indieListener
	for i, p := range svc.Spec.Ports {
		if p.Protocol != v1.ProtocolTCP && p.Protocol != v1.ProtocolUDP {
			return bad("spec.ports[%d] (%q) has protocol %s, expected TCP or UDP", i, p.Name, p.Protocol)
		}
		if p.NodePort == 0 {
			return bad("spec.ports[%d] (%q) has no node port, expected one (allocateLoadBalancerNodePorts=false is not supported: indie load balancers forward to node ports)", i, p.Name)
		}
		ls = append(ls, indieListener{Protocol: string(p.Protocol), Port: p.Port, TargetPort: p.NodePort})
	}
	slices.SortFunc(ls, func(a, b indieListener) int {
		if a.Port != b.Port {
			return int(a.Port - b.Port)
		}
		return strings.Compare(a.Protocol, b.Protocol)
	})
	ranges, err := servicehelpers.GetLoadBalancerSourceRanges(svc)
	if err != nil {
		return bad("%w", err)
	}
	sources := ranges.StringSlice()
	slices.Sort(sources)
	path, port := servicehelpers.GetServiceHealthCheckPathPort(svc)
	if port == 0 {
		path, port = "/healthz", indieKubeProxyHealthPort
	}
	tags := l.owner(svc)
	tags[indieTagService] = svc.Namespace + "/" + svc.Name
	return indieLBSpec{
		Name: l.GetLoadBalancerName(context.TODO(), "", svc), Tags: tags, Listeners: ls,
		Targets: indieTargets(nodes), HealthCheck: indieHealthCheck{Port: port, Path: path}, SourceRanges: sources,
	}, nil
}

// indieTargets returns the sorted VM IDs of nodes. A Node without an indie
// provider ID is left out: it is not initialized yet, and the service
// controller syncs backends again when spec.providerID is set
// (controllers/service/controller.go shouldSyncUpdatedNode).
func indieTargets(nodes []*v1.Node) []string {
	var ids []string
	for _, n := range nodes {
		if id, err := indieVMID(n.Spec.ProviderID); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// UpdateLoadBalancer sets the targets, if they differ.
func (l *indieLoadBalancers) UpdateLoadBalancer(ctx context.Context, _ string, svc *v1.Service, nodes []*v1.Node) error {
	targets := indieTargets(nodes)
	defer l.lock(svc.UID)()
	lb, err := l.find(ctx, svc)
	switch {
	case err != nil:
		return err
	case lb == nil:
		return fmt.Errorf("indie: service %s/%s (uid %s) has no load balancer in cluster %q to update", svc.Namespace, svc.Name, svc.UID, l.p.cfg.ClusterID)
	case slices.Equal(lb.Spec.Targets, targets):
		return nil
	}
	if err := l.p.sdk.SetTargets(ctx, lb.ID, targets); err != nil {
		return fmt.Errorf("indie: setting the targets of load balancer %s of service %s/%s: %w", lb.ID, svc.Namespace, svc.Name, err)
	}
	return nil
}

// EnsureLoadBalancerDeleted needs only the Service's UID, so a stale Service
// (type ClusterIP, no ports) is enough.
func (l *indieLoadBalancers) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *v1.Service) error {
	defer l.lock(svc.UID)()
	lb, err := l.find(ctx, svc)
	if err != nil || lb == nil {
		return err
	}
	if err := l.p.sdk.DeleteLoadBalancer(ctx, lb.ID); err != nil && !errors.Is(err, errIndieNotFound) {
		return fmt.Errorf("indie: deleting load balancer %s of service %s/%s: %w", lb.ID, svc.Namespace, svc.Name, err)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Routes.

// indieRoutes implements cloudprovider.Routes over the project's route
// table: a route's next hop is a VM ID, it is owned by the cluster ID tag,
// and its name is unique per (cluster, node, CIDR). IPv4 only.
type indieRoutes struct{ p *indieProvider }

// ListRoutes lists this cluster's routes, DestinationCIDR as created, the
// Node name the route was created for as TargetNode (the next hop's VM name
// for a route without one), and routes to gone VMs as Blackhole
// (controllers/route/route_controller.go reconcile deletes those).
func (r indieRoutes) ListRoutes(ctx context.Context, _ string) ([]*cloudprovider.Route, error) {
	all, err := r.p.sdk.ListRoutes(ctx)
	if err != nil {
		return nil, fmt.Errorf("indie: listing routes: %w", err)
	}
	var out []*cloudprovider.Route
	for _, rt := range all {
		if rt.Tags[indieTagCluster] != r.p.cfg.ClusterID {
			continue
		}
		vm, ok, err := r.p.vms.get(ctx, rt.TargetVM, "")
		if err != nil {
			return nil, fmt.Errorf("indie: route %s: next hop %s: %w", rt.Name, rt.TargetVM, err)
		}
		node := rt.Tags[indieTagNode]
		if node == "" && ok {
			node = vm.Name
		}
		out = append(out, &cloudprovider.Route{Name: rt.Name, TargetNode: types.NodeName(node), DestinationCIDR: rt.Destination, Blackhole: rt.Blackhole})
	}
	return out, nil
}

func (r indieRoutes) name(nameHint string, route *cloudprovider.Route) string {
	if nameHint == "" {
		nameHint = string(route.TargetNode)
	}
	h := fnv.New32a()
	h.Write([]byte(route.DestinationCIDR))
	return fmt.Sprintf("k8s-%s-%s-%08x", r.p.cfg.ClusterID, nameHint, h.Sum32())
}

// CreateRoute stores DestinationCIDR verbatim: the route controller compares
// it as a string (controllers/route/route_controller.go getRouteAction).
// Creating a route that exists as asked is a success.
func (r indieRoutes) CreateRoute(ctx context.Context, _ string, nameHint string, route *cloudprovider.Route) error {
	if _, err := netip.ParsePrefix(route.DestinationCIDR); err != nil {
		return fmt.Errorf("indie: route DestinationCIDR %q: %w, expected a CIDR such as 10.244.1.0/24 or fd00:10:244:1::/64", route.DestinationCIDR, err)
	}
	vm, err := r.target(ctx, route)
	if err != nil {
		return err
	}
	want := indieRoute{Name: r.name(nameHint, route), Destination: route.DestinationCIDR, TargetVM: vm.ID,
		Tags: map[string]string{indieTagCluster: r.p.cfg.ClusterID, indieTagNode: string(route.TargetNode)}}
	err = r.p.sdk.CreateRoute(ctx, want)
	if errors.Is(err, errIndieConflict) {
		if got, ok, lerr := r.lookup(ctx, want.Name); lerr == nil && ok && got.Destination == want.Destination && got.TargetVM == want.TargetVM {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("indie: creating route %s (%s via %s): %w", want.Name, want.Destination, vm.ID, err)
	}
	return nil
}

// target is the live VM of the route's Node: the VM named as the Node, else
// (a Node named unlike its VM) the VM whose private IP is one of the
// Node's InternalIPs, which the route controller passes as
// TargetNodeAddresses (controllers/route/route_controller.go reconcile).
func (r indieRoutes) target(ctx context.Context, route *cloudprovider.Route) (indieVM, error) {
	vm, ok, err := r.p.vms.get(ctx, "", string(route.TargetNode))
	if err != nil {
		return indieVM{}, fmt.Errorf("indie: route to node %s: %w", route.TargetNode, err)
	}
	if ok && vm.State != indieTerminated {
		return vm, nil
	}
	internal := func(a v1.NodeAddress) bool { return a.Type == v1.NodeInternalIP }
	if slices.ContainsFunc(route.TargetNodeAddresses, internal) {
		vms, err := r.p.sdk.ListVMs(ctx)
		if err != nil {
			return indieVM{}, fmt.Errorf("indie: route to node %s: %w", route.TargetNode, err)
		}
		for _, vm := range vms {
			if vm.State != indieTerminated && slices.Contains(route.TargetNodeAddresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: vm.PrivateIP}) {
				return vm, nil
			}
		}
	}
	return indieVM{}, fmt.Errorf("indie: route to node %s: no live VM has that name or one of its InternalIPs %v, expected the node's VM", route.TargetNode, route.TargetNodeAddresses)
}

func (r indieRoutes) lookup(ctx context.Context, name string) (indieRoute, bool, error) {
	all, err := r.p.sdk.ListRoutes(ctx)
	if err != nil {
		return indieRoute{}, false, err
	}
	i := slices.IndexFunc(all, func(rt indieRoute) bool { return rt.Name == name })
	if i < 0 {
		return indieRoute{}, false, nil
	}
	return all[i], true, nil
}

// DeleteRoute deletes a route as ListRoutes returned it; one already gone
// is a success, another cluster's is an error.
func (r indieRoutes) DeleteRoute(ctx context.Context, _ string, route *cloudprovider.Route) error {
	got, ok, err := r.lookup(ctx, route.Name)
	switch {
	case err != nil:
		return fmt.Errorf("indie: deleting route %q: %w", route.Name, err)
	case !ok:
		return nil
	case got.Tags[indieTagCluster] != r.p.cfg.ClusterID:
		return fmt.Errorf("indie: route %q belongs to cluster %q, not %q: expected a route as ListRoutes returns it", route.Name, got.Tags[indieTagCluster], r.p.cfg.ClusterID)
	}
	if err := r.p.sdk.DeleteRoute(ctx, route.Name); err != nil && !errors.Is(err, errIndieNotFound) {
		return fmt.Errorf("indie: deleting route %q: %w", route.Name, err)
	}
	return nil
}

// ---------------------------------------------------------------------------
// The test project: a cloud with three VMs, the provider of cluster "blue"
// and, as Target.OtherCluster, of cluster "green", and the suite's hooks.

const indieRegion = "region-1"

type indieSandbox struct {
	cloud       *indieCloud
	blue, green *indieProvider
	nodes       []*v1.Node
	// renamed are Nodes named unlike their VMs (Target.RenamedNodes), and
	// nodeName names the Node of each VM by ID.
	renamed  []*v1.Node
	nodeName map[string]string
}

func newIndieSandbox(opts indieOptions) (*indieSandbox, error) {
	s := &indieSandbox{cloud: newIndieCloud(1)}
	var err error
	if s.blue, err = newIndieProvider(indieConfig{ClusterID: "blue", Region: indieRegion}, s.cloud.client(), opts); err != nil {
		return nil, err
	}
	if s.green, err = newIndieProvider(indieConfig{ClusterID: "green", Region: indieRegion}, s.cloud.client(), opts); err != nil {
		return nil, err
	}
	for _, vm := range []indieVM{
		{ID: "vm-7f3a", Name: "worker-1", Zone: "zone-a", PublicIP: "192.0.2.11"},
		{ID: "vm-2c91", Name: "worker-2", Zone: "zone-b"},
		{ID: "vm-b04e", Name: "worker-3", Zone: "zone-a", PublicIP: "192.0.2.13", Type: "std-4"},
	} {
		s.nodes = append(s.nodes, indieNode(s.cloud.addVM(vm)))
	}
	// A kubelet run with --hostname-override and --provider-id: its Node is
	// not named as its VM, so only the provider ID finds it.
	n := indieNode(s.cloud.addVM(indieVM{ID: "vm-91d0", Name: "ip-10-0-0-14", Zone: "zone-b"}))
	n.Name = "edge-gateway"
	s.renamed = append(s.renamed, n)
	s.nodeName = map[string]string{"vm-91d0": n.Name}
	return s, nil
}

// indieNode is vm's Node as its kubelet registers it and the cloud node
// controller initializes it: provider ID, addresses, topology labels.
func indieNode(vm indieVM) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: vm.Name, UID: uuid.NewUUID(), Labels: map[string]string{
			v1.LabelHostname: vm.Name, v1.LabelInstanceTypeStable: vm.Type,
			v1.LabelTopologyZone: vm.Zone, v1.LabelTopologyRegion: indieRegion,
		}},
		Spec: v1.NodeSpec{ProviderID: indieScheme + vm.ID},
		Status: v1.NodeStatus{
			Addresses:  indieAddresses(vm),
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}},
		},
	}
}

func (s *indieSandbox) target() *conformance.Target {
	return &conformance.Target{
		Cloud:        s.blue,
		Nodes:        s.nodes,
		RenamedNodes: s.renamed,
		OtherCluster: s.green,
		Hooks: conformance.Hooks{
			CreateInstance:    s.createInstance,
			StopInstance:      s.setState(indieStopped),
			StartInstance:     s.setState(indieRunning),
			TerminateInstance: s.setState(indieTerminated),
			CloudChanged:      s.cloudChanged,
			Owned:             s.owned,
			Writes:            s.blue.sdk.writes.Load,
			Outage:            s.outage,
			Backends:          s.backends,
			Listeners:         s.listeners,
			SourceRanges:      s.sourceRanges,
			HealthCheck:       s.healthCheck,
		},
	}
}

func (s *indieSandbox) createInstance(_ context.Context, name string) (*v1.Node, error) {
	return indieNode(s.cloud.addVM(indieVM{Name: name, Zone: "zone-b"})), nil
}

func (s *indieSandbox) setState(state string) func(context.Context, *v1.Node) error {
	return func(_ context.Context, n *v1.Node) error {
		id := ""
		if n.Spec.ProviderID != "" {
			var err error
			if id, err = indieVMID(n.Spec.ProviderID); err != nil {
				return err
			}
		} else if vm, ok := s.cloud.vm("", n.Name); ok {
			id = vm.ID
		}
		return s.cloud.setState(id, state)
	}
}

// cloudChanged drops both clusters' VM caches, as a cloud event would.
func (s *indieSandbox) cloudChanged(context.Context) error {
	s.blue.vms.invalidate()
	s.green.vms.invalidate()
	return nil
}

func (s *indieSandbox) outage() func() {
	s.cloud.setOutage(true)
	return func() { s.cloud.setOutage(false) }
}

// owned lists blue's load balancers and routes.
func (s *indieSandbox) owned(context.Context) ([]string, error) {
	var out []string
	for _, lb := range s.cloud.lbsTagged(map[string]string{indieTagCluster: "blue"}) {
		out = append(out, "lb/"+lb.ID)
	}
	s.cloud.mu.Lock()
	defer s.cloud.mu.Unlock()
	for _, rt := range s.cloud.routeList() {
		if rt.Tags[indieTagCluster] == "blue" {
			out = append(out, "route/"+rt.Name)
		}
	}
	return out, nil
}

// lb returns blue's load balancer of svc.
func (s *indieSandbox) lb(svc *v1.Service) (indieLB, error) {
	lbs := s.cloud.lbsTagged(s.blue.lbs.owner(svc))
	if len(lbs) != 1 {
		return indieLB{}, fmt.Errorf("%d load balancers of cluster blue for service %s/%s (uid %s), expected 1", len(lbs), svc.Namespace, svc.Name, svc.UID)
	}
	return lbs[0], nil
}

// backends maps the targets' VM IDs back to Node names (VM names); an
// unknown ID is returned as is, so that it shows in a diff.
func (s *indieSandbox) backends(_ context.Context, _ string, svc *v1.Service) ([]string, error) {
	lb, err := s.lb(svc)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range lb.Spec.Targets {
		if name, ok := s.nodeName[id]; ok {
			id = name
		} else if vm, ok := s.cloud.vm(id, ""); ok {
			id = vm.Name
		}
		out = append(out, id)
	}
	return out, nil
}

func (s *indieSandbox) listeners(_ context.Context, _ string, svc *v1.Service) ([]conformance.Listener, error) {
	lb, err := s.lb(svc)
	var out []conformance.Listener
	for _, l := range lb.Spec.Listeners {
		out = append(out, conformance.Listener{Protocol: v1.Protocol(l.Protocol), Port: l.Port, NodePort: l.TargetPort})
	}
	return out, err
}

func (s *indieSandbox) sourceRanges(_ context.Context, _ string, svc *v1.Service) ([]string, error) {
	lb, err := s.lb(svc)
	return lb.Spec.SourceRanges, err
}

func (s *indieSandbox) healthCheck(_ context.Context, _ string, svc *v1.Service) (conformance.HealthCheck, error) {
	lb, err := s.lb(svc)
	return conformance.HealthCheck{Port: lb.Spec.HealthCheck.Port, Path: lb.Spec.HealthCheck.Path}, err
}

// ---------------------------------------------------------------------------
// Tests.

// indieRetryAfter is the RetryAfter of the test's provider while a load
// balancer provisions (production: 5s). The suite waits it out, as the
// service controller does, clamped to at most 1s, so it sets the run time
// (every new load balancer is two RetryAfters) and nothing else.
const indieRetryAfter = 200 * time.Millisecond

// TestIndependentProvider runs the suite against indie with production
// settings (a VM cache TTL of one minute, dropped by Hooks.CloudChanged;
// load balancers without an address for their first two answers).
func TestIndependentProvider(t *testing.T) {
	conformance.Run(t, conformance.Config{
		ProviderName:   indieName,
		CloudConfig:    `{"clusterID": "registered", "region": "region-1"}`,
		BadCloudConfig: `{"region": "region-1"}`,
		Claims: conformance.Claims{LoadBalancer: true, InstancesV2: true, Routes: true,
			UDP: true, MixedProtocols: true, SourceRanges: true, SourceRangesAnnotation: true, IPv6Routes: true},
		NewTarget: func(context.Context) (*conformance.Target, error) {
			s, err := newIndieSandbox(indieOptions{RetryAfter: indieRetryAfter})
			if err != nil {
				return nil, err
			}
			return s.target(), nil
		},
	})
}

// TestIndependentProviderIsRealistic pins what makes indie a meaningful
// check of the suite: load balancers are asynchronous, instances are
// cached, VM IDs are not names.
func TestIndependentProviderIsRealistic(t *testing.T) {
	ctx := t.Context()
	newSandbox := func(t *testing.T) (*indieSandbox, *clocktesting.FakeClock) {
		clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
		s, err := newIndieSandbox(indieOptions{RetryAfter: indieRetryAfter, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return s, clock
	}

	t.Run("asynchronous load balancers", func(t *testing.T) {
		s, _ := newSandbox(t)
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: uuid.NewUUID()},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
				ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster},
		}
		type answer struct {
			Ingress    []v1.LoadBalancerIngress
			RetryAfter time.Duration
			Writes     int64
		}
		ensure := func() answer {
			st, err := s.blue.lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, s.nodes)
			var a answer
			if re := (*api.RetryError)(nil); errors.As(err, &re) {
				a.RetryAfter = re.RetryAfter()
			} else if err != nil {
				t.Fatalf("EnsureLoadBalancer: %v", err)
			}
			if st != nil {
				a.Ingress = st.Ingress
			}
			a.Writes = s.blue.sdk.writes.Load()
			return a
		}
		got := []answer{ensure(), ensure(), ensure(), ensure()}
		ip := []v1.LoadBalancerIngress{{IP: "198.18.0.6"}} // the cloud numbers VMs, load balancers and addresses from one sequence: 4 VMs, an LB ID, then its address
		want := []answer{
			{RetryAfter: indieRetryAfter, Writes: 1}, // created, no address in the create response
			{RetryAfter: indieRetryAfter, Writes: 1}, // first listing: still provisioning
			{Ingress: ip, Writes: 1},                 // second listing: an address
			{Ingress: ip, Writes: 1},                 // converged: no write
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("four EnsureLoadBalancer calls answered (-want +got):\n%s", d)
		}
	})

	t.Run("cached VM list", func(t *testing.T) {
		s, clock := newSandbox(t)
		inst := s.blue.inst
		lists := func() int64 { return s.blue.sdk.vmLists.Load() }
		for _, n := range s.nodes {
			if _, err := inst.InstanceMetadata(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		if got := lists(); got != 1 {
			t.Errorf("InstanceMetadata of %d nodes made %d ListVMs calls, expected 1", len(s.nodes), got)
		}
		if err := s.cloud.setState("vm-7f3a", indieStopped); err != nil {
			t.Fatal(err)
		}
		shutdown := func() bool {
			down, err := inst.InstanceShutdown(ctx, s.nodes[0])
			if err != nil {
				t.Fatal(err)
			}
			return down
		}
		if shutdown() {
			t.Errorf("InstanceShutdown of a VM stopped behind the cache's back, within the TTL, = true, expected the cached false")
		}
		clock.Step(time.Minute)
		if !shutdown() {
			t.Errorf("InstanceShutdown of a stopped VM once the TTL passed = false, expected true")
		}
		fresh := indieNode(s.cloud.addVM(indieVM{Name: "worker-4", Zone: "zone-a"}))
		if ok, err := inst.InstanceExists(ctx, fresh); err != nil || !ok {
			t.Errorf("InstanceExists of a VM created after the list was cached = (%v, %v), expected a cache miss to ask the cloud and say (true, nil)", ok, err)
		}
		if got := lists(); got != 3 {
			t.Errorf("ListVMs calls after a TTL expiry and a miss = %d, expected 3", got)
		}
		s.cloud.setOutage(true)
		if ok, err := inst.InstanceExists(ctx, s.nodes[1]); err != nil || !ok {
			t.Errorf("InstanceExists during an outage, list cached = (%v, %v), expected the cached (true, nil)", ok, err)
		}
		if err := s.cloudChanged(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, err := inst.InstanceExists(ctx, s.nodes[1]); err == nil {
			t.Errorf("InstanceExists during an outage after CloudChanged dropped the cache = (%v, nil), expected an error", ok)
		}
	})

	t.Run("VM IDs are not names", func(t *testing.T) {
		s, _ := newSandbox(t)
		var ids, names []string
		for _, n := range s.nodes {
			md, err := s.blue.inst.InstanceMetadata(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}})
			if err != nil {
				t.Fatal(err)
			}
			id, err := indieVMID(md.ProviderID)
			if err != nil {
				t.Fatal(err)
			}
			if id == n.Name {
				t.Errorf("node %s: VM ID %q equals the name, expected them to differ", n.Name, id)
			}
			ids, names = append(ids, id), append(names, n.Name)
		}
		if d := cmp.Diff([]string{"vm-7f3a", "vm-2c91", "vm-b04e"}, ids); d != "" {
			t.Errorf("VM IDs looked up by node name (-want +got):\n%s", d)
		}
		// Routes and load balancers keep VM IDs, and give names back.
		rt := &cloudprovider.Route{TargetNode: types.NodeName(names[1]), DestinationCIDR: "10.244.2.0/24"}
		if err := s.blue.routes.CreateRoute(ctx, "kubernetes", string(s.nodes[1].UID), rt); err != nil {
			t.Fatal(err)
		}
		listed, err := s.blue.routes.ListRoutes(ctx, "kubernetes")
		if err != nil || len(listed) != 1 {
			t.Fatalf("ListRoutes = (%v, %v), expected one route", listed, err)
		}
		s.cloud.mu.Lock()
		hop := s.cloud.routes[listed[0].Name].TargetVM
		s.cloud.mu.Unlock()
		if hop != ids[1] || listed[0].TargetNode != types.NodeName(names[1]) {
			t.Errorf("route next hop %q, listed TargetNode %q, expected next hop %q and TargetNode %q", hop, listed[0].TargetNode, ids[1], names[1])
		}
	})
}

func TestIndependentProviderConfig(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		nilReader    bool
		want         string // substring of the error; empty for success
		reason       string
	}{
		{name: "valid", config: `{"clusterID": "prod-eu", "region": "region-1"}`, reason: "both fields set, valid DNS labels"},
		{name: "no config", nilReader: true, want: "no --cloud-config", reason: "the CCM passes a nil reader without --cloud-config"},
		{name: "missing cluster ID", config: `{"region": "region-1"}`, want: `clusterID ""`, reason: "load balancers and routes are owned by the cluster ID"},
		{name: "bad cluster ID", config: `{"clusterID": "Prod_EU", "region": "region-1"}`, want: `clusterID "Prod_EU"`, reason: "the cluster ID becomes part of route names"},
		{name: "missing region", config: `{"clusterID": "prod-eu"}`, want: `region ""`, reason: "metadata reports the region"},
		{name: "unknown field", config: `{"clusterID": "prod-eu", "region": "region-1", "zone": "a"}`, want: `unknown field "zone"`, reason: "a typo must not be ignored"},
		{name: "not JSON", config: `clusterID: prod-eu`, want: "invalid character", reason: "the config is JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader
			if !tc.nilReader {
				r = strings.NewReader(tc.config)
			}
			_, err := parseIndieConfig(r)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("parseIndieConfig(%q) = %v, expected success (%s)", tc.config, err, tc.reason)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("parseIndieConfig(%q) = %v, expected an error containing %q (%s)", tc.config, err, tc.want, tc.reason)
			}
		})
	}
}
