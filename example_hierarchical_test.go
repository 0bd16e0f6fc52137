package ccmkit_test

// This file is the README's "A hierarchical cloud (Octavia-like)", compiled
// and run: "octa", a provider for a cloud whose load-balancer API is a tree
// of objects, like OpenStack Octavia's. A load balancer has listeners, each
// listener one pool, each pool its members (addresses) and a health
// monitor, every one an object with an ID; each write leaves the load
// balancer PENDING_UPDATE for about a second, and a write meanwhile is
// refused with a 409. Only the octaAPI type stands in for the cloud's SDK.
// octa's servers are VMs like acme's, so its instances half is
// example_test.go's vmDriver over an acmeAPI; what differs is the
// load-balancer Driver.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

// octa's per-port annotations. A Service names a port by number or name:
// lb.octa.example/certificate: "https=cert-1".
var (
	octaAnnotations = &annotation.Set{}
	// octaCertificate is a port's TLS certificate, a reference in octa's
	// key manager: a Setting, so it lands in that port's
	// Listener.Settings, and a change is one write to that listener.
	octaCertificate = octaAnnotations.MustDeclare(annotation.Annotation{
		Name: "lb.octa.example/certificate", Kind: annotation.KindString, PerPort: true, Setting: true,
		Doc: `The TLS certificate of each listed port, a reference in octa's key manager ("https=cert-1"): the port's listener terminates TLS with it (appProtocol https).`,
	})
	// octaAppProtocol is a port's application protocol, for tooling that
	// cannot set spec.ports[].appProtocol (Options.AppProtocolAnnotation).
	octaAppProtocol = octaAnnotations.MustDeclare(annotation.Annotation{
		Name: "lb.octa.example/app-protocol", Kind: annotation.KindEnum, Values: []string{"http", "https"}, PerPort: true,
		Doc: `The application protocol of each listed port ("80=http"), as spec.ports[].appProtocol says it.`,
	})
)

// NewOcta is octa's provider factory. Its cloud-config has acme's fields.
func NewOcta(cfg *Config) (cloudprovider.Interface, error) {
	p, err := newOcta(cfg, newOctaAPI(clock.RealClock{}, octaPending), dialAcme(cfg.Endpoint, cfg.Token.Reveal()), nil)
	if err != nil {
		return nil, err // never a typed nil *octa
	}
	return p, nil
}

// octa is the provider and its caches, which a provider drops when its
// cloud tells it of a change.
type octa struct {
	cloudprovider.Interface
	cache   *instances.Cache
	lbCache *loadbalancer.Cache
}

// newOcta composes octa over its load-balancer API and its compute API;
// clk is the clock the Reconciler waits for a busy cloud on (nil: the real
// one).
func newOcta(cfg *Config, lbAPI *octaAPI, compute *acmeAPI, clk clock.Clock) (*octa, error) {
	codec := provider.Codec{Scheme: "octa"}
	cache, err := instances.NewCache(vmDriver{compute}, instances.CacheOptions{}) // one List per minute
	if err != nil {
		return nil, err
	}
	nodes, err := instances.NewAdapter(cache, codec, instances.Options{})
	if err != nil {
		return nil, err
	}
	lbCache, err := loadbalancer.NewCache(octaDriver{lbAPI}, loadbalancer.CacheOptions{}) // one List per minute
	if err != nil {
		return nil, err
	}
	lbs, err := loadbalancer.NewReconciler(lbCache, octaOptions(cfg, nodes, clk)) // Find, Apply, Delete, List
	if err != nil {
		return nil, err
	}
	cloud, err := provider.New("octa", provider.Options{ClusterID: cfg.ClusterID, LoadBalancer: lbs, InstancesV2: nodes})
	if err != nil {
		return nil, err
	}
	return &octa{cloud, cache, lbCache}, nil
}

// octaOptions are the Reconciler's options on octa: its capabilities and
// annotations.
func octaOptions(cfg *Config, nodes cloudprovider.InstancesV2, clk clock.Clock) loadbalancer.Options {
	return loadbalancer.Options{
		ClusterID: cfg.ClusterID,
		Instances: nodes,                          // addresses and existence of nodes
		Codec:     provider.Codec{Scheme: "octa"}, // a foreign Node is left out, not fatal
		Capabilities: loadbalancer.Capabilities{SourceRanges: true,
			ListenerPools: true,                           // a pool per listener: one cloud object per action
			BackendKey:    loadbalancer.BackendKeyAddress, // members are addresses
			AppProtocols:  []string{"http", "https"},      // HTTP and HTTPS listeners
		},
		Annotations:           octaAnnotations,
		AppProtocolAnnotation: octaAppProtocol,
		Clock:                 clk, // waits for a busy cloud within MaxBusyWait, 2s
	}
}

func init() {
	if err := provider.Register("octa", NewOcta); err != nil {
		panic(err) // only a second registration of "octa" gets here
	}
}

// octaPending is how long octa keeps a load balancer PENDING_UPDATE after
// a write, as its documentation says.
const octaPending = time.Second

// octaDriver is loadbalancer.ListDriver over the octa API: each action is
// one octa write, answered by busy.
type octaDriver struct{ api *octaAPI }

func (d octaDriver) Apply(_ context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	switch a.Kind {
	case loadbalancer.ActionCreate: // the load balancer alone; the Reconciler plans its listeners next
		c := a.Create
		t, err := d.api.CreateLoadBalancer(c.Name, c.Tags, c.Spec.IPFamilies[0], c.Spec.SourceRanges)
		if err != nil {
			return nil, err
		}
		return t.model(), busy(nil) // its new ID
	case loadbalancer.ActionAddListener:
		l := a.Listener
		id, err := d.api.CreateListener(a.LoadBalancerID, l.Port, octaProtocol(l), l.Settings[octaCertificate.Name])
		return reported(a, err, func(l *loadbalancer.Listener) { l.ID = id })
	case loadbalancer.ActionAddListenerPool:
		id, err := d.api.CreatePool(listenerIn(a.Current, a.Listener).ID) // Current has the ID of a listener just added
		return reported(a, err, func(l *loadbalancer.Listener) { l.Pool.ID = id })
	case loadbalancer.ActionAddBackends, loadbalancer.ActionRemoveBackends:
		after, err := loadbalancer.Apply(a.Current, a) // octa replaces a pool's members in one call
		if err != nil {
			return nil, err
		}
		l := listenerIn(after, a.Listener)
		return nil, busy(d.api.ReplaceMembers(l.Pool.ID, octaMembers(l.Pool.Backends, l.NodePort)))
	case loadbalancer.ActionUpdateHealthCheck:
		hc := a.HealthCheck
		return nil, busy(d.api.SetMonitor(listenerIn(a.Current, a.Listener).Pool.ID, hc.Port, hc.Path))
	case loadbalancer.ActionUpdateListener: // the members' port, or the protocol and certificate
		return d.updateListener(a)
	case loadbalancer.ActionRemoveListenerPool:
		return nil, busy(d.api.DeletePool(a.Listener.Pool.ID)) // its members and monitor with it
	case loadbalancer.ActionRemoveListener:
		return nil, busy(d.api.DeleteListener(a.Listener.ID))
	case loadbalancer.ActionUpdateSourceRanges:
		return nil, busy(d.api.UpdateLoadBalancer(a.LoadBalancerID, nil, a.SourceRanges))
	case loadbalancer.ActionUpdateTags:
		tags := maps.Clone(a.Current.Tags) // octa replaces them all
		maps.Copy(tags, a.Tags)
		return nil, busy(d.api.UpdateLoadBalancer(a.LoadBalancerID, tags, nil))
	}
	return nil, fmt.Errorf("octa has no call for %s: %w", a.Kind, loadbalancer.ErrUnsupported)
}

// busy says what the answer err of an octa write means to the Reconciler
// (see loadbalancer.Driver): nil, written, and the load balancer is now
// PENDING_UPDATE (Busy: the Reconciler waits before its next write); a
// 409, refused because it was not ACTIVE, nothing changed (Busy and
// ErrRefused: the same write again, later); anything else, failed.
func busy(err error) error {
	switch {
	case err == nil: // written: the load balancer is PENDING_UPDATE
		return loadbalancer.Busy(octaPending, "PENDING_UPDATE")
	case octaStatus(err) == http.StatusConflict: // it was not ACTIVE: nothing changed
		return errors.Join(loadbalancer.ErrRefused, loadbalancer.Busy(octaPending, err.Error()))
	}
	return err
}

// reported answers a write that did a (err nil) with the load balancer
// after it, Apply on a.Current, where set adds what only octa knows: a new
// object's ID, which the next actions need. The other writes answer nil,
// and the Reconciler derives the result itself.
func reported(a loadbalancer.Action, err error, set func(*loadbalancer.Listener)) (*loadbalancer.LoadBalancer, error) {
	if err != nil {
		return nil, busy(err)
	}
	lb, err := loadbalancer.Apply(a.Current, a)
	if err != nil {
		return nil, err
	}
	set(listenerIn(lb, a.Listener))
	return lb, busy(nil)
}

// updateListener makes one write: octa keeps the node port on the pool's
// members, the protocol and certificate on the listener. When both
// changed it moves the members and reports only that done; the Reconciler
// plans the listener's write next.
func (d octaDriver) updateListener(a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	old, l := a.OldListener, a.Listener
	if old.NodePort != l.NodePort && old.Pool != nil && len(old.Pool.Backends) > 0 {
		err := d.api.ReplaceMembers(old.Pool.ID, octaMembers(old.Pool.Backends, l.NodePort))
		moved := *old
		moved.NodePort = l.NodePort
		a.Listener = &moved
		return reported(a, err, func(*loadbalancer.Listener) {})
	}
	if octaProtocol(old) == octaProtocol(l) && old.Settings[octaCertificate.Name] == l.Settings[octaCertificate.Name] {
		return nil, nil // only a node port, and no members to carry it yet: nothing to write
	}
	return nil, busy(d.api.UpdateListener(l.ID, octaProtocol(l), l.Settings[octaCertificate.Name]))
}

func (d octaDriver) Delete(_ context.Context, lb *loadbalancer.LoadBalancer) error {
	err := d.api.DeleteLoadBalancer(lb.ID) // cascade: listeners, pools, members, monitors
	switch {
	case octaStatus(err) == http.StatusNotFound:
		return nil // gone
	case err == nil: // PENDING_DELETE: the Reconciler calls again after the delay, and then it is gone
		return loadbalancer.Busy(octaPending, "PENDING_DELETE")
	}
	return busy(err)
}

func (d octaDriver) Find(_ context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	if q.ID != "" {
		return d.trees([]string{q.ID})
	}
	ids, err := d.api.ListLoadBalancerIDs(q.Name, q.Tags)
	if err != nil {
		return nil, err
	}
	return d.trees(ids)
}

func (d octaDriver) List(ctx context.Context) ([]*loadbalancer.LoadBalancer, error) {
	return d.Find(ctx, loadbalancer.Query{Tags: map[string]string{}}) // every tag of none: all
}

// trees reads the load balancers ids, one tree each; one that is gone is
// left out.
func (d octaDriver) trees(ids []string) ([]*loadbalancer.LoadBalancer, error) {
	out := []*loadbalancer.LoadBalancer{}
	for _, id := range ids {
		t, err := d.api.Tree(id)
		if octaStatus(err) == http.StatusNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, t.model())
	}
	return out, nil
}

// model is the load balancer of tree t as the Reconciler sees it. octa
// keeps a listener's node port on its members: a listener without members
// reports 0 (Plan reads it as unknown where the listener has a pool, and
// plans an UpdateListener where it has none, which updateListener answers
// without a write).
func (t *octaLB) model() *loadbalancer.LoadBalancer {
	family := v1.IPv4Protocol
	if t.VIP.Is6() {
		family = v1.IPv6Protocol
	}
	lb := &loadbalancer.LoadBalancer{ID: t.ID, Name: t.Name, Tags: t.Tags,
		Spec:    loadbalancer.Spec{IPFamilies: []v1.IPFamily{family}, SourceRanges: t.AllowedCIDRs},
		Ingress: []loadbalancer.Ingress{{IP: t.VIP.String()}},
	}
	for _, l := range t.Listeners {
		ml := loadbalancer.Listener{ID: l.ID, AppProtocol: octaAppProtocols[l.Protocol],
			ListenerKey: loadbalancer.ListenerKey{Family: family, Protocol: v1.ProtocolTCP, Port: l.Port},
			Settings:    map[string]string{octaCertificate.Name: l.TLSRef},
		}
		if p := l.Pool; p != nil {
			ml.Pool = &loadbalancer.ListenerPool{ID: p.ID}
			for _, m := range p.Members {
				ml.NodePort = m.Port
				b := loadbalancer.Backend{IPv4: m.Address}
				if m.Address.Is6() {
					b = loadbalancer.Backend{IPv6: m.Address}
				}
				ml.Pool.Backends = append(ml.Pool.Backends, b)
			}
			if hm := p.Monitor; hm != nil {
				ml.Pool.HealthCheck = &loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: hm.Port, Path: hm.Path}
			}
		}
		lb.Spec.Listeners = append(lb.Spec.Listeners, ml)
	}
	return lb
}

// octaProtocol is the octa protocol of listener l: its application
// protocol, terminating TLS when it has a certificate.
func octaProtocol(l *loadbalancer.Listener) string {
	switch {
	case l.AppProtocol == "http":
		return "HTTP"
	case l.AppProtocol == "https" && l.Settings[octaCertificate.Name] != "":
		return "TERMINATED_HTTPS"
	case l.AppProtocol == "https":
		return "HTTPS" // passed through
	}
	return "TCP"
}

// octaAppProtocols maps octa's listener protocols back (octaProtocol).
var octaAppProtocols = map[string]string{"TCP": "", "HTTP": "http", "HTTPS": "https", "TERMINATED_HTTPS": "https"}

// listenerIn returns the listener of lb with l's key (a pointer into lb),
// or a zero one, whose calls octa then answers 404.
func listenerIn(lb *loadbalancer.LoadBalancer, l *loadbalancer.Listener) *loadbalancer.Listener {
	i := slices.IndexFunc(lb.Spec.Listeners, func(x loadbalancer.Listener) bool { return x.ListenerKey == l.ListenerKey })
	if i < 0 {
		return &loadbalancer.Listener{Pool: &loadbalancer.ListenerPool{}}
	}
	return &lb.Spec.Listeners[i]
}

// octaMembers are the members of backends bs on port: one address each.
func octaMembers(bs []loadbalancer.Backend, port int32) []octaMember {
	var out []octaMember
	for _, b := range bs {
		addr := b.IPv4
		if !addr.IsValid() {
			addr = b.IPv6
		}
		out = append(out, octaMember{Address: addr, Port: port})
	}
	return out
}

func Example_hierarchicalProvider() {
	// Simulated time: the cloud is busy for a second after each write, and
	// the Reconciler's waits for it pass at once (simClock).
	clk := newSimClock()
	cloudAPI := newOctaAPI(clk, octaPending)
	compute := dialAcme("", "")
	compute.addVM("")
	p, err := newOcta(&Config{ClusterID: "prod-1"}, cloudAPI, compute, clk)
	if err != nil {
		fmt.Println(err)
		return
	}
	var nodes []*v1.Node
	vms, _ := compute.vms()
	for _, vm := range vms {
		nodes = append(nodes, octaNode(vm))
	}
	svc := octaService("web") // HTTP on 80, HTTPS on 443 with cert-1 (below)
	lbs, _ := p.LoadBalancer()
	// ensure is the service controller: EnsureLoadBalancer, again after
	// each RetryError's delay.
	ensure := func(what string) {
		fmt.Println(what + ":")
		for {
			status, err := lbs.EnsureLoadBalancer(context.Background(), "kubernetes", svc, nodes)
			for _, w := range cloudAPI.takeLog() {
				fmt.Println("  " + w)
			}
			var retry *api.RetryError
			if !errors.As(err, &retry) && err != nil {
				fmt.Println("  failed:", err)
				return
			}
			if retry != nil {
				fmt.Println("  (come back in", retry.RetryAfter().String()+")")
				clk.Step(retry.RetryAfter())
				continue
			}
			reads, writes := cloudAPI.takeCounts()
			fmt.Printf("  ready at %s; writes %d, reads %d\n", status.Ingress[0].IP, writes, reads)
			return
		}
	}
	ensure("bring-up")
	clk.Step(time.Minute)         // later, the cloud calm again
	svc.Spec.Ports[1].Port = 8443 // octa keeps a listener's port: a new listener, pool, members and monitor
	ensure("port 443 -> 8443")
	clk.Step(time.Minute)
	svc.Annotations[octaCertificate.Name] = "https=cert-2" // one listener's certificate
	ensure("certificate of https -> cert-2")
	// Output:
	// bring-up:
	//   POST /loadbalancers -> lb-1, VIP 198.51.100.1
	//   POST /listeners -> listener-2, port 80 HTTP
	//   POST /listeners -> listener-3, port 443 TERMINATED_HTTPS, cert cert-1
	//   (come back in 1s)
	//   POST /pools -> pool-4, of listener-2
	//   PUT /pools/pool-4/members 10.0.0.1:30080 10.0.0.2:30080
	//   PUT /pools/pool-4/healthmonitor HTTP :10256/healthz
	//   (come back in 1s)
	//   POST /pools -> pool-8, of listener-3
	//   PUT /pools/pool-8/members 10.0.0.1:30443 10.0.0.2:30443
	//   PUT /pools/pool-8/healthmonitor HTTP :10256/healthz
	//   ready at 198.51.100.1; writes 9, reads 1
	// port 443 -> 8443:
	//   DELETE /pools/pool-8
	//   DELETE /listeners/listener-3
	//   POST /listeners -> listener-12, port 8443 TERMINATED_HTTPS, cert cert-1
	//   (come back in 1s)
	//   POST /pools -> pool-13, of listener-12
	//   PUT /pools/pool-13/members 10.0.0.1:30443 10.0.0.2:30443
	//   PUT /pools/pool-13/healthmonitor HTTP :10256/healthz
	//   ready at 198.51.100.1; writes 6, reads 0
	// certificate of https -> cert-2:
	//   PUT /listeners/listener-12 TERMINATED_HTTPS, cert cert-2
	//   ready at 198.51.100.1; writes 1, reads 0
}

// octaService is a LoadBalancer Service named name with an HTTP port and
// an HTTPS port whose certificate is cert-1.
func octaService(name string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("uid-" + name),
			Annotations: map[string]string{octaCertificate.Name: "https=cert-1"}},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeLoadBalancer,
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports: []v1.ServicePort{
				{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080, AppProtocol: new("http")},
				{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, NodePort: 30443, AppProtocol: new("https")},
			},
		},
	}
}

// simClock is simulated time for the example and the call-counting test:
// a FakeClock on which a wait of d (the Reconciler's, for a busy cloud)
// moves the time on by d at once.
type simClock struct{ *clocktesting.FakeClock }

// newSimClock returns a simClock at the start of 2026.
func newSimClock() simClock {
	return simClock{clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
}

// NewTimer returns a timer of d that has fired: the clock is d later.
func (c simClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.Step(d)
	return t
}

// octaNode is the Node of vm as the cloud-node controller leaves it, with
// octa's provider ID.
func octaNode(vm instances.Instance) *v1.Node {
	n := acmeNode(vm)
	n.Spec.ProviderID = "octa://" + vm.ID
	return n
}

// octaAPI is an in-memory stand-in for octa's load-balancer SDK, shaped
// like OpenStack Octavia's API: a load balancer, its listeners, one pool
// per listener, the pool's members and its health monitor are objects of
// their own, each with an ID. Every write leaves the load balancer
// PENDING_CREATE, PENDING_UPDATE or PENDING_DELETE for busy, on clock, and
// a write while it is not ACTIVE is refused with a 409; a listener's port
// cannot change (no call takes it); a pool's members are replaced in one
// call; deleting a load balancer deletes everything in it. A load
// balancer is read whole, as a tree, in one call, and listed (IDs only) in
// another. Every call is counted by kind; it is safe for concurrent use.
type octaAPI struct {
	mu     sync.Mutex
	clock  clock.PassiveClock
	busy   time.Duration
	lbs    map[string]*octaLB
	lastID int
	calls  map[string]int // by kind, such as "PUT /pools/{id}/members"; refusals as "409"
	log    []string       // the writes taken, for people, until takeLog
	down   bool           // every call fails
}

// octaLB is a load balancer as octa's API returns it: the whole tree.
type octaLB struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Tags         map[string]string `json:"tags"`
	VIP          netip.Addr        `json:"vip_address"`
	AllowedCIDRs []netip.Prefix    `json:"allowed_cidrs"`
	Status       string            `json:"provisioning_status"` // ACTIVE or PENDING_*
	Until        time.Time         `json:"-"`                   // the end of a PENDING_ status
	Listeners    []*octaListener   `json:"listeners"`
}

type octaListener struct {
	ID       string    `json:"id"`
	Protocol string    `json:"protocol"` // TCP, HTTP, HTTPS or TERMINATED_HTTPS
	Port     int32     `json:"protocol_port"`
	TLSRef   string    `json:"default_tls_container_ref"`
	Pool     *octaPool `json:"default_pool"`
}

type octaPool struct {
	ID      string       `json:"id"`
	Members []octaMember `json:"members"`
	Monitor *octaMonitor `json:"healthmonitor"`
}

type octaMember struct {
	ID      string     `json:"id"`
	Address netip.Addr `json:"address"`
	Port    int32      `json:"protocol_port"`
}

type octaMonitor struct {
	ID   string `json:"id"`
	Port int32  `json:"monitor_port"`
	Path string `json:"url_path"` // of an HTTP GET
}

// octaError is an error answer of the octa API.
type octaError struct {
	Code int
	Msg  string
}

func (e *octaError) Error() string { return fmt.Sprintf("octa: %d %s", e.Code, e.Msg) }

// octaStatus is the HTTP status of an octa error answer, 0 for any other
// error or none.
func octaStatus(err error) int {
	var e *octaError
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// newOctaAPI returns an empty octa cloud whose load balancers are busy for
// busy after each write, on clk.
func newOctaAPI(clk clock.PassiveClock, busy time.Duration) *octaAPI {
	return &octaAPI{clock: clk, busy: busy, lbs: map[string]*octaLB{}, calls: map[string]int{}}
}

// call takes the lock for one call of kind and counts it; it fails while
// the API is down. Load balancers whose PENDING_ time is over are ACTIVE
// again, or gone after a delete.
func (a *octaAPI) call(kind string) (unlock func(), err error) {
	a.mu.Lock()
	a.calls[kind]++
	if a.down {
		a.mu.Unlock()
		return nil, &octaError{http.StatusServiceUnavailable, "service unavailable"}
	}
	now := a.clock.Now()
	for id, lb := range a.lbs {
		switch {
		case lb.Status == "ACTIVE" || now.Before(lb.Until):
		case lb.Status == "PENDING_DELETE":
			delete(a.lbs, id)
		default:
			lb.Status = "ACTIVE"
		}
	}
	return a.mu.Unlock, nil
}

// write makes one write of kind to the load balancer that holds the object
// id: 404 when there is none, 409 while the load balancer is not ACTIVE,
// else change, which returns what it did for the log; the load balancer is
// then PENDING_UPDATE for busy.
func (a *octaAPI) write(kind, id string, change func(lb *octaLB) (string, error)) error {
	unlock, err := a.call(kind)
	if err != nil {
		return err
	}
	defer unlock()
	lb := a.holder(id)
	switch {
	case lb == nil:
		return &octaError{http.StatusNotFound, id + " not found"}
	case lb.Status != "ACTIVE":
		a.calls["409"]++
		return &octaError{http.StatusConflict, fmt.Sprintf("load balancer %s is %s", lb.ID, lb.Status)}
	}
	what, err := change(lb)
	if err != nil {
		return err
	}
	if lb.Status == "ACTIVE" { // a delete made it PENDING_DELETE
		lb.Status = "PENDING_UPDATE"
	}
	lb.Until = a.clock.Now().Add(a.busy)
	a.log = append(a.log, strings.TrimSpace(strings.Replace(kind, "{id}", id, 1)+" "+what))
	return nil
}

// holder returns the load balancer that is, or holds, object id.
func (a *octaAPI) holder(id string) *octaLB {
	for _, lb := range a.lbs {
		if lb.ID == id || slices.ContainsFunc(lb.Listeners, func(l *octaListener) bool {
			return l.ID == id || (l.Pool != nil && l.Pool.ID == id)
		}) {
			return lb
		}
	}
	return nil
}

// newID returns a new object ID of kind, such as "pool-3".
func (a *octaAPI) newID(kind string) string {
	a.lastID++
	return kind + "-" + strconv.Itoa(a.lastID)
}

// CreateLoadBalancer is POST /loadbalancers: a load balancer with a VIP of
// family and no listeners, PENDING_CREATE.
func (a *octaAPI) CreateLoadBalancer(name string, tags map[string]string, family v1.IPFamily, allowed []netip.Prefix) (*octaLB, error) {
	unlock, err := a.call("POST /loadbalancers")
	if err != nil {
		return nil, err
	}
	defer unlock()
	lb := &octaLB{ID: a.newID("lb"), Name: name, Tags: maps.Clone(tags), AllowedCIDRs: slices.Clone(allowed),
		Status: "PENDING_CREATE", Until: a.clock.Now().Add(a.busy)}
	n, _ := strconv.Atoi(strings.TrimPrefix(lb.ID, "lb-"))
	lb.VIP = netip.AddrFrom4([4]byte{198, 51, 100, byte(n)}) //nolint:gosec // G115: n numbers the example's load balancers, a handful
	if family == v1.IPv6Protocol {
		lb.VIP = netip.MustParseAddr("2001:db8::" + strconv.FormatInt(int64(n), 16))
	}
	a.lbs[lb.ID] = lb
	a.log = append(a.log, fmt.Sprintf("POST /loadbalancers -> %s, VIP %s", lb.ID, lb.VIP))
	return decoded(lb), nil
}

// UpdateLoadBalancer is PUT /loadbalancers/{id}: its tags (all of them) and
// allowed CIDRs, each unless nil.
func (a *octaAPI) UpdateLoadBalancer(id string, tags map[string]string, allowed []netip.Prefix) error {
	return a.write("PUT /loadbalancers/{id}", id, func(lb *octaLB) (string, error) {
		if tags != nil {
			lb.Tags = maps.Clone(tags)
		}
		if allowed != nil {
			lb.AllowedCIDRs = slices.Clone(allowed)
		}
		return fmt.Sprintf("tags %d, allowed %v", len(lb.Tags), lb.AllowedCIDRs), nil
	})
}

// DeleteLoadBalancer is DELETE /loadbalancers/{id}?cascade=true: the load
// balancer and everything in it, gone after PENDING_DELETE.
func (a *octaAPI) DeleteLoadBalancer(id string) error {
	return a.write("DELETE /loadbalancers/{id}", id, func(lb *octaLB) (string, error) {
		lb.Status = "PENDING_DELETE"
		return "cascade", nil
	})
}

// CreateListener is POST /listeners: a listener of load balancer lbID,
// without a pool. Its port can never change.
func (a *octaAPI) CreateListener(lbID string, port int32, protocol, tlsRef string) (string, error) {
	var id string
	err := a.write("POST /listeners", lbID, func(lb *octaLB) (string, error) {
		if slices.ContainsFunc(lb.Listeners, func(l *octaListener) bool { return l.Port == port }) {
			return "", &octaError{http.StatusBadRequest, fmt.Sprintf("port %d is in use", port)}
		}
		id = a.newID("listener")
		lb.Listeners = append(lb.Listeners, &octaListener{ID: id, Protocol: protocol, Port: port, TLSRef: tlsRef})
		return fmt.Sprintf("-> %s, port %d %s%s", id, port, protocol, withCert(tlsRef)), nil
	})
	return id, err
}

// UpdateListener is PUT /listeners/{id}: its protocol and certificate.
func (a *octaAPI) UpdateListener(id, protocol, tlsRef string) error {
	return a.write("PUT /listeners/{id}", id, func(lb *octaLB) (string, error) {
		l := a.listener(lb, id)
		l.Protocol, l.TLSRef = protocol, tlsRef
		return protocol + withCert(tlsRef), nil
	})
}

// DeleteListener is DELETE /listeners/{id}, with its pool.
func (a *octaAPI) DeleteListener(id string) error {
	return a.write("DELETE /listeners/{id}", id, func(lb *octaLB) (string, error) {
		lb.Listeners = slices.DeleteFunc(lb.Listeners, func(l *octaListener) bool { return l.ID == id })
		return "", nil
	})
}

// CreatePool is POST /pools: the empty pool of listener listenerID.
func (a *octaAPI) CreatePool(listenerID string) (string, error) {
	var id string
	err := a.write("POST /pools", listenerID, func(lb *octaLB) (string, error) {
		l := a.listener(lb, listenerID)
		if l == nil || l.Pool != nil {
			return "", &octaError{http.StatusBadRequest, "listener " + listenerID + " is no listener without a pool"}
		}
		id = a.newID("pool")
		l.Pool = &octaPool{ID: id}
		return fmt.Sprintf("-> %s, of %s", id, listenerID), nil
	})
	return id, err
}

// DeletePool is DELETE /pools/{id}, with its members and monitor.
func (a *octaAPI) DeletePool(id string) error {
	return a.write("DELETE /pools/{id}", id, func(lb *octaLB) (string, error) {
		a.pool(lb, id).Pool = nil
		return "", nil
	})
}

// ReplaceMembers is PUT /pools/{id}/members: the pool's members become ms;
// a member kept (same address) keeps its ID.
func (a *octaAPI) ReplaceMembers(poolID string, ms []octaMember) error {
	return a.write("PUT /pools/{id}/members", poolID, func(lb *octaLB) (string, error) {
		p := a.pool(lb, poolID).Pool
		next := make([]octaMember, len(ms))
		var desc []string
		for i, m := range ms {
			m.ID = a.newID("member")
			if j := slices.IndexFunc(p.Members, func(o octaMember) bool { return o.Address == m.Address }); j >= 0 {
				m.ID = p.Members[j].ID
			}
			next[i] = m
			desc = append(desc, netip.AddrPortFrom(m.Address, uint16(m.Port)).String()) //nolint:gosec // G115: a member port is a node port, 1-65535
		}
		p.Members = next
		return strings.Join(desc, " "), nil
	})
}

// SetMonitor is PUT /pools/{id}/healthmonitor: the pool's HTTP health
// monitor, created or changed.
func (a *octaAPI) SetMonitor(poolID string, port int32, path string) error {
	return a.write("PUT /pools/{id}/healthmonitor", poolID, func(lb *octaLB) (string, error) {
		p := a.pool(lb, poolID).Pool
		if p.Monitor == nil {
			p.Monitor = &octaMonitor{ID: a.newID("monitor")}
		}
		p.Monitor.Port, p.Monitor.Path = port, path
		return fmt.Sprintf("HTTP :%d%s", port, path), nil
	})
}

// listener returns the listener id of lb, or nil.
func (a *octaAPI) listener(lb *octaLB, id string) *octaListener {
	i := slices.IndexFunc(lb.Listeners, func(l *octaListener) bool { return l.ID == id })
	if i < 0 {
		return nil
	}
	return lb.Listeners[i]
}

// pool returns the listener of lb whose pool is id (write found lb by it).
func (a *octaAPI) pool(lb *octaLB, id string) *octaListener {
	i := slices.IndexFunc(lb.Listeners, func(l *octaListener) bool { return l.Pool != nil && l.Pool.ID == id })
	return lb.Listeners[i]
}

// ListLoadBalancerIDs is GET /loadbalancers?fields=id&name=…&tags=…: the
// IDs of the load balancers named name (any when empty) with all of tags.
func (a *octaAPI) ListLoadBalancerIDs(name string, tags map[string]string) ([]string, error) {
	unlock, err := a.call("GET /loadbalancers")
	if err != nil {
		return nil, err
	}
	defer unlock()
	var ids []string
	for _, lb := range a.lbs {
		if (name == "" || lb.Name == name) && matches(lb.Tags, tags) {
			ids = append(ids, lb.ID)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Tree is GET /loadbalancers/{id}/tree: the load balancer with its
// listeners, pools, members and monitors, in one call.
func (a *octaAPI) Tree(id string) (*octaLB, error) {
	unlock, err := a.call("GET /loadbalancers/{id}/tree")
	if err != nil {
		return nil, err
	}
	defer unlock()
	lb := a.lbs[id]
	if lb == nil {
		return nil, &octaError{http.StatusNotFound, id + " not found"}
	}
	return decoded(lb), nil
}

// matches reports whether tags has every tag of want.
func matches(tags, want map[string]string) bool {
	for k, v := range want {
		if tags[k] != v {
			return false
		}
	}
	return true
}

// decoded is v as a client decodes it: nothing shared with the API.
func decoded[T any](v T) T {
	var out T
	b, _ := json.Marshal(v)
	_ = json.Unmarshal(b, &out)
	return out
}

// withCert is ", cert REF" for a listener with a certificate, for the log.
func withCert(ref string) string {
	if ref == "" {
		return ""
	}
	return ", cert " + ref
}

// takeLog returns the writes taken since the last takeLog.
func (a *octaAPI) takeLog() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	log := a.log
	a.log = nil
	return log
}

// takeCounts returns the reads and the writes (any answer) made since the
// last takeCounts, and starts counting again.
func (a *octaAPI) takeCounts() (reads, writes int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for kind, n := range a.calls {
		switch {
		case strings.HasPrefix(kind, "GET "):
			reads += n
		case kind != "409":
			writes += n
		}
	}
	a.calls = map[string]int{}
	return reads, writes
}
