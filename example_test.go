package ccmkit_test

// This file is the README's "Your own provider in ~30 lines", compiled and
// run: an "acme" provider composed from ccmkit's building blocks. Only the
// acmeAPI type stands in for your cloud's SDK; in your code, the three small
// drivers call the real API instead.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/routes"
)

// Config is acme's cloud-config (--cloud-config), decoded strictly.
type Config struct {
	ClusterID string          `json:"clusterID"`
	Endpoint  string          `json:"endpoint"`
	Token     provider.Secret `json:"token"` // never printed
}

// Validate rejects a config without a cluster ID.
func (c *Config) Validate() error {
	if c.ClusterID == "" {
		return errors.New("clusterID: required, expected the tag of this cluster's resources")
	}
	return nil
}

// NewAcme is the provider factory: the ~30 lines of the README, with the
// composition in newAcme so that the conformance test can build the same
// provider over a sandbox acme cloud.
func NewAcme(cfg *Config) (cloudprovider.Interface, error) {
	p, err := newAcme(cfg, dialAcme(cfg.Endpoint, cfg.Token.Reveal()))
	if err != nil {
		return nil, err // never a typed nil *acme
	}
	return p, nil
}

// acme is the provider: the composed cloudprovider.Interface, and the
// instance and load-balancer caches, which a provider drops when its cloud
// tells it of a change (here: the conformance test, after it changed the
// cloud).
type acme struct {
	cloudprovider.Interface
	cache   *instances.Cache
	lbCache *loadbalancer.Cache
}

func newAcme(cfg *Config, api *acmeAPI) (*acme, error) {
	cache, err := instances.NewCache(vmDriver{api}, instances.CacheOptions{}) // one List per minute
	if err != nil {
		return nil, err
	}
	nodes, err := instances.NewAdapter(cache, provider.Codec{Scheme: "acme"}, instances.Options{})
	if err != nil {
		return nil, err
	}
	lbCache, err := loadbalancer.NewCache(lbDriver{api}, loadbalancer.CacheOptions{}) // one List per minute
	if err != nil {
		return nil, err
	}
	lbs, err := loadbalancer.NewReconciler(lbCache, loadbalancer.Options{ // Find, Apply, Delete, List
		ClusterID: cfg.ClusterID,
		Instances: nodes,                          // addresses and existence of nodes
		Codec:     provider.Codec{Scheme: "acme"}, // a foreign Node is left out, not fatal
		Capabilities: loadbalancer.Capabilities{UDP: true, SourceRanges: true,
			BackendKey: loadbalancer.BackendKeyProviderID}, // acme targets VM IDs
	})
	if err != nil {
		return nil, err
	}
	table, err := routes.NewWholeTable(routeDriver{api}, routes.Options{ClusterID: cfg.ClusterID, IPv4Only: true})
	if err != nil {
		return nil, err
	}
	cloud, err := provider.New("acme", provider.Options{ClusterID: cfg.ClusterID,
		LoadBalancer: lbs, InstancesV2: nodes, Routes: table,
	})
	if err != nil {
		return nil, err
	}
	return &acme{cloud, cache, lbCache}, nil
}

// lbDriver is loadbalancer.ListDriver over the acme API.
type lbDriver struct{ api *acmeAPI }

func (d lbDriver) Find(_ context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	return d.api.findLBs(func(lb *loadbalancer.LoadBalancer) bool {
		switch {
		case q.ID != "":
			return lb.ID == q.ID
		case q.Name != "":
			return lb.Name == q.Name
		}
		for k, v := range q.Tags {
			if lb.Tags[k] != v {
				return false
			}
		}
		return true
	})
}

func (d lbDriver) List(context.Context) ([]*loadbalancer.LoadBalancer, error) {
	return d.api.findLBs(func(*loadbalancer.LoadBalancer) bool { return true })
}

func (d lbDriver) Apply(_ context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	return d.api.applyLB(a)
}

func (d lbDriver) Delete(_ context.Context, lb *loadbalancer.LoadBalancer) error {
	return d.api.deleteLB(lb.ID)
}

// vmDriver is instances.ListDriver over the acme API.
type vmDriver struct{ api *acmeAPI }

func (d vmDriver) GetByID(_ context.Context, id provider.ProviderID) (instances.Instance, error) {
	return d.api.vm(func(vm instances.Instance) bool { return vm.ID == id.ID })
}

func (d vmDriver) GetByName(_ context.Context, name string) (instances.Instance, error) {
	return d.api.vm(func(vm instances.Instance) bool { return vm.Name == name })
}

func (d vmDriver) List(context.Context) ([]instances.Instance, error) { return d.api.vms() }

// routeDriver is routes.TableDriver over the acme API's one route table.
type routeDriver struct{ api *acmeAPI }

func (d routeDriver) ReadTable(context.Context) ([]routes.Entry, string, error) {
	return d.api.readRoutes()
}

func (d routeDriver) WriteTable(_ context.Context, rev string, entries []routes.Entry) error {
	return d.api.writeRoutes(rev, entries)
}

// The provider registers itself when its package is imported, as in the
// README.
func init() {
	if err := provider.Register("acme", NewAcme); err != nil {
		panic(err) // only a second registration of "acme" gets here
	}
}

func Example_yourOwnProvider() {
	// What the cloud-controller-manager does with --cloud-provider=acme.
	cloud, err := cloudprovider.GetCloudProvider("acme", strings.NewReader("clusterID: prod-1\nendpoint: https://api.acme\ntoken: s3cr3t\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	nodes, _ := cloud.InstancesV2()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}
	md, err := nodes.InstanceMetadata(ctx, node)
	fmt.Println(md.ProviderID, md.Zone, md.NodeAddresses, err)

	lbs, _ := cloud.LoadBalancer()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "5f1b"},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeLoadBalancer,
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports:      []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
		},
	}
	node.Spec.ProviderID = md.ProviderID
	node.Status.Addresses = md.NodeAddresses
	// acme provisions load balancers asynchronously: the first call asks
	// the service controller to come back, the next one has the address.
	_, err = lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{node})
	var retry *api.RetryError
	fmt.Println(errors.As(err, &retry), retry.RetryAfter())
	status, err := lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{node})
	fmt.Println(status.Ingress[0].IP, err)
	// Output:
	// acme://i-1 zone-a [{InternalIP 10.0.0.1} {Hostname worker-1}] <nil>
	// true 10s
	// 203.0.113.1 <nil>
}

// acmeAPI is an in-memory stand-in for acme's cloud SDK. Like a real IaaS
// it keeps load-balancer targets as VM IDs, rejects a target that is not a
// VM, provisions a new load balancer before it has an address (here: until
// it is read again), versions its route table, and can be down (every call
// fails).
type acmeAPI struct {
	mu      sync.Mutex
	lbs     map[string]*loadbalancer.LoadBalancer
	nextLB  int
	machine []instances.Instance
	table   []routes.Entry
	rev     int
	down    bool  // every call fails
	writes  int64 // calls that change something
}

func dialAcme(endpoint, token string) *acmeAPI {
	return &acmeAPI{
		lbs: map[string]*loadbalancer.LoadBalancer{},
		machine: []instances.Instance{{
			ID: "i-1", Name: "worker-1", Type: "m1", Zone: "zone-a", Region: "eu-1",
			Addresses: []v1.NodeAddress{{Type: v1.NodeHostName, Address: "worker-1"}, {Type: v1.NodeInternalIP, Address: "10.0.0.1"}},
		}},
	}
}

// errDown is every call's error while the API is down.
var errDown = errors.New("acme: 503 service unavailable")

// call takes the lock for one API call; it fails while the API is down.
func (a *acmeAPI) call(write bool) (unlock func(), err error) {
	a.mu.Lock()
	if a.down {
		a.mu.Unlock()
		return nil, errDown
	}
	if write {
		a.writes++
	}
	return a.mu.Unlock, nil
}

func (a *acmeAPI) findLBs(match func(*loadbalancer.LoadBalancer) bool) ([]*loadbalancer.LoadBalancer, error) {
	unlock, err := a.call(false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := []*loadbalancer.LoadBalancer{}
	for _, id := range slices.Sorted(maps.Keys(a.lbs)) {
		lb := a.lbs[id]
		if len(lb.Ingress) == 0 { // provisioned by now
			n, _ := strconv.Atoi(strings.TrimPrefix(id, "lb-"))
			lb.Ingress = []loadbalancer.Ingress{{IP: "203.0.113." + strconv.Itoa(n)}}
		}
		if match(lb) {
			out = append(out, lb.Clone())
		}
	}
	return out, nil
}

func (a *acmeAPI) applyLB(act loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	unlock, err := a.call(true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	next, err := loadbalancer.Apply(a.lbs[act.LoadBalancerID], act)
	if err != nil {
		return nil, err
	}
	for i, b := range next.Spec.Backends { // acme keeps VM IDs only
		id := strings.TrimPrefix(b.ProviderID, "acme://")
		if !slices.ContainsFunc(a.machine, func(vm instances.Instance) bool { return vm.ID == id }) {
			return nil, fmt.Errorf("acme: 404 target server %q does not exist", id)
		}
		next.Spec.Backends[i] = loadbalancer.Backend{ProviderID: b.ProviderID}
	}
	if act.Kind == loadbalancer.ActionCreate {
		a.nextLB++
		next.ID = "lb-" + strconv.Itoa(a.nextLB) // no address while provisioning
	}
	a.lbs[next.ID] = next
	return next.Clone(), nil
}

func (a *acmeAPI) deleteLB(id string) error {
	unlock, err := a.call(true)
	if err != nil {
		return err
	}
	defer unlock()
	delete(a.lbs, id)
	return nil
}

func (a *acmeAPI) vm(match func(instances.Instance) bool) (instances.Instance, error) {
	vms, err := a.vms()
	if err != nil {
		return instances.Instance{}, err
	}
	for _, vm := range vms {
		if match(vm) {
			return vm, nil
		}
	}
	return instances.Instance{}, instances.ErrNotFound
}

func (a *acmeAPI) vms() ([]instances.Instance, error) {
	unlock, err := a.call(false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return slices.Clone(a.machine), nil
}

func (a *acmeAPI) readRoutes() ([]routes.Entry, string, error) {
	unlock, err := a.call(false)
	if err != nil {
		return nil, "", err
	}
	defer unlock()
	return slices.Clone(a.table), strconv.Itoa(a.rev), nil
}

func (a *acmeAPI) writeRoutes(rev string, entries []routes.Entry) error {
	unlock, err := a.call(true)
	if err != nil {
		return err
	}
	defer unlock()
	if rev != strconv.Itoa(a.rev) {
		return routes.ErrConflict
	}
	a.table, a.rev = entries, a.rev+1
	return nil
}
