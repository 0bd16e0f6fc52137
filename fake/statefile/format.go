package statefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/instances"
	bound "github.com/ccmkit/ccmkit/internal/clip"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/routes"
)

// stateFormat is the "format" field of the state files the fake writes
// and the only one it reads: a file of any other format is rejected. (v1,
// an earlier draft, was never released.)
const stateFormat = "ccmkit.io/fake-state/v2"

// stateDoc is the JSON document of a state file (see the package
// documentation, "Shared state file").
type stateDoc struct {
	Format           string             `json:"format"`
	Generation       uint64             `json:"generation"`
	Cloud            stateCloud         `json:"cloud"`
	NextInstance     int                `json:"nextInstance"`
	NextLoadBalancer int                `json:"nextLoadBalancer"`
	NextBackendPool  int                `json:"nextBackendPool,omitempty"`
	NextListener     int                `json:"nextListener,omitempty"`
	NextListenerPool int                `json:"nextListenerPool,omitempty"`
	RouteRevision    uint64             `json:"routeRevision"`
	Pools            []statePool        `json:"pools"`
	Instances        []stateInstance    `json:"instances"`
	LoadBalancers    []stateLB          `json:"loadBalancers"`
	BackendPools     []stateBackendPool `json:"backendPools,omitempty"`
	Routes           []stateRoute       `json:"routes"`
}

// stateBackendPool is a shared backend pool as a state file keeps it, its
// members' addresses as strings.
type stateBackendPool struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Tags       map[string]string `json:"tags"`
	IPFamilies []string          `json:"ipFamilies"`
	Backends   []stateBackend    `json:"backends"`
	BackendKey string            `json:"backendKey,omitempty"`
}

// stateCloud is the part of the cloud-config that defines the cloud: every
// process sharing a file must have the same.
type stateCloud struct {
	InstanceCIDRs []string      `json:"instanceCIDRs"`
	LoadBalancers stateLBConfig `json:"loadBalancers"`
}

// stateLBConfig is the part of LoadBalancerSection that defines the cloud
// (not the provisioning delay, which each process may change at run time:
// each load balancer keeps when it is ready; nor busyAfterWrite: each
// keeps until when it is busy). BackendPools is absent unless shared,
// Hierarchical and UniqueNames unless true (a file written before them is
// flat, and its names may repeat).
type stateLBConfig struct {
	IPv4Pool       string                `json:"ipv4Pool"`
	IPv6Pool       string                `json:"ipv6Pool"`
	HostnameSuffix string                `json:"hostnameSuffix,omitempty"`
	IPMode         v1.LoadBalancerIPMode `json:"ipMode,omitempty"`
	Backends       fake.BackendMode      `json:"backends,omitempty"`
	BackendPools   fake.BackendPoolMode  `json:"backendPools,omitempty"`
	Hierarchical   bool                  `json:"hierarchical,omitempty"`
	UniqueNames    bool                  `json:"uniqueNames,omitempty"`
}

// statePool is an address pool's allocation cursor: the next address it
// tries.
type statePool struct {
	CIDR string `json:"cidr"`
	Next string `json:"next"`
}

// stateRoute is a route table entry, with the address types and the
// Blackhole flag that Route leaves out. routes.Entry.Extra is not stored
// (the fake keeps its index record there, rebuilt when a file is loaded).
type stateRoute struct {
	Cluster             string           `json:"cluster"`
	Name                string           `json:"name"`
	DestinationCIDR     string           `json:"destinationCIDR"`
	TargetNode          string           `json:"targetNode"`
	TargetNodeAddresses []v1.NodeAddress `json:"targetNodeAddresses,omitempty"`
	Blackhole           bool             `json:"blackhole,omitempty"`
}

// cloudOf returns c in its state-file form.
func cloudOf(c fake.SavedCloud) stateCloud {
	lb := c.LoadBalancers
	return stateCloud{InstanceCIDRs: slices.Clone(c.InstanceCIDRs), LoadBalancers: stateLBConfig{
		IPv4Pool: lb.IPv4Pool, IPv6Pool: lb.IPv6Pool, HostnameSuffix: lb.HostnameSuffix, IPMode: lb.IPMode, Backends: lb.Backends, BackendPools: lb.BackendPools,
		Hierarchical: lb.Hierarchical, UniqueNames: lb.UniqueNames,
	}}
}

// saved parses c back (cloudOf).
func (c stateCloud) saved() fake.SavedCloud {
	lb := c.LoadBalancers
	return fake.SavedCloud{InstanceCIDRs: c.InstanceCIDRs, LoadBalancers: fake.LoadBalancerSection{
		IPv4Pool: lb.IPv4Pool, IPv6Pool: lb.IPv6Pool, HostnameSuffix: lb.HostnameSuffix, IPMode: lb.IPMode, Backends: lb.Backends, BackendPools: lb.BackendPools,
		Hierarchical: lb.Hierarchical, UniqueNames: lb.UniqueNames,
	}}
}

// encodeState returns st as the document of generation gen.
func encodeState(st *fake.SavedState, gen uint64) *stateDoc {
	doc := &stateDoc{
		Format: stateFormat, Generation: gen, Cloud: cloudOf(st.Cloud),
		NextInstance: st.NextInstance, NextLoadBalancer: st.NextLoadBalancer, NextBackendPool: st.NextBackendPool, RouteRevision: st.RouteRevision,
		NextListener: st.NextListener, NextListenerPool: st.NextListenerPool,
		Instances: []stateInstance{}, LoadBalancers: []stateLB{}, Routes: []stateRoute{},
	}
	for i := range st.BackendPools {
		doc.BackendPools = append(doc.BackendPools, storedBackendPool(&st.BackendPools[i]))
	}
	for _, in := range st.Instances {
		doc.Instances = append(doc.Instances, stateInstance{Instance: in, State: stateNames[in.State]})
	}
	for _, v := range st.LoadBalancers {
		doc.LoadBalancers = append(doc.LoadBalancers, storedLoadBalancer(v))
	}
	for _, p := range st.Pools {
		doc.Pools = append(doc.Pools, statePool{CIDR: p.CIDR, Next: p.Next})
	}
	for _, e := range st.Routes {
		doc.Routes = append(doc.Routes, stateRoute{
			Cluster: e.Cluster, Name: e.Name, DestinationCIDR: e.DestinationCIDR, TargetNode: string(e.TargetNode),
			TargetNodeAddresses: e.TargetNodeAddresses, Blackhole: e.Blackhole,
		})
	}
	return doc
}

// decodeState parses a state file strictly into the state it holds and
// its generation. Errors name the field. Its steps: parseStateDoc (the
// document and its format), then savedState (the text fields parsed); the
// fake checks the state itself (fake.Persistence.Load's restore).
func decodeState(data []byte) (*fake.SavedState, uint64, error) {
	doc, err := parseStateDoc(data)
	if err != nil {
		return nil, 0, err
	}
	st, err := doc.savedState()
	if err != nil {
		return nil, 0, err
	}
	return st, doc.Generation, nil
}

// parseStateDoc decodes data strictly (an unknown field, or data after
// the document, is an error) as a document of format stateFormat.
func parseStateDoc(data []byte) (stateDoc, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return stateDoc{}, errors.New("empty: expected a JSON document written by the fake (format " + stateFormat + ")")
	}
	var doc stateDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "" {
			// encoding/json names the Go type it wanted: say what.
			return stateDoc{}, fmt.Errorf("not a valid state file: a JSON %s: expected a JSON object written by the fake (format %s)", typeErr.Value, stateFormat)
		}
		return stateDoc{}, fmt.Errorf("not a valid state file: %w", err)
	}
	if dec.More() {
		return stateDoc{}, errors.New("not a valid state file: data after the JSON document")
	}
	if doc.Format != stateFormat {
		return stateDoc{}, fmt.Errorf("format %q: expected %q", doc.Format, stateFormat)
	}
	return doc, nil
}

// savedState parses the text fields of doc (instance states, addresses,
// CIDRs, keys), stopping at the first item that has a problem (the error
// names it and every problem of its fields).
func (doc *stateDoc) savedState() (*fake.SavedState, error) {
	st := &fake.SavedState{
		Cloud: doc.Cloud.saved(), NextInstance: doc.NextInstance, NextLoadBalancer: doc.NextLoadBalancer,
		NextBackendPool: doc.NextBackendPool, RouteRevision: doc.RouteRevision,
		NextListener: doc.NextListener, NextListenerPool: doc.NextListenerPool,
	}
	for _, p := range doc.Pools {
		st.Pools = append(st.Pools, fake.SavedPool{CIDR: p.CIDR, Next: p.Next})
	}
	for i, in := range doc.Instances {
		out, err := in.instance(field.NewPath("instances").Index(i))
		if err != nil {
			return nil, err
		}
		st.Instances = append(st.Instances, out)
	}
	for i, v := range doc.BackendPools {
		p, err := v.pool()
		if err != nil {
			return nil, fmt.Errorf("backendPools[%d] (id %q): %w", i, v.ID, err)
		}
		st.BackendPools = append(st.BackendPools, *p)
	}
	for i, v := range doc.LoadBalancers {
		lb, err := v.record()
		if err != nil {
			return nil, fmt.Errorf("loadBalancers[%d] (id %q): %w", i, v.ID, err)
		}
		st.LoadBalancers = append(st.LoadBalancers, lb)
	}
	for _, r := range doc.Routes {
		st.Routes = append(st.Routes, routes.Entry{
			Cluster: r.Cluster, Name: r.Name, DestinationCIDR: r.DestinationCIDR, TargetNode: types.NodeName(r.TargetNode),
			TargetNodeAddresses: r.TargetNodeAddresses, Blackhole: r.Blackhole,
		})
	}
	return st, nil
}

// stateNames are the text forms of the instance states.
var stateNames = map[instances.State]string{instances.StateRunning: "running", instances.StateStopped: "stopped", instances.StateTerminated: "terminated"}

// instance returns the instance of in with its state parsed; path names
// it in errors. The fake checks the rest (fake.Persistence.Load).
func (in stateInstance) instance(path *field.Path) (fake.Instance, error) {
	out := in.Instance
	switch {
	case in.State == "":
		return fake.Instance{}, fmt.Errorf("%s: expected running, stopped or terminated", path.Child("state"))
	case out.State.UnmarshalText([]byte(in.State)) != nil:
		return fake.Instance{}, field.ErrorList{field.NotSupported(path.Child("state"), bound.Quoted(in.State), []string{"running", "stopped", "terminated"})}.ToAggregate()
	}
	return out, nil
}

// stateInstance is an instance as a state file keeps it: its state is
// read as text, so that a missing or unknown state is an error naming the
// field.
type stateInstance struct {
	fake.Instance
	State string `json:"state"` // hides Instance.State
}

// stateLB is a load balancer as a state file keeps it (format v2):
// with the ingress it reports once ready, and addresses and CIDRs as
// strings.
type stateLB struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	Tags            map[string]string `json:"tags"`
	IPFamilies      []string          `json:"ipFamilies"`
	RequestedIPs    []string          `json:"requestedIPs,omitempty"`
	Listeners       []stateListener   `json:"listeners"`
	Backends        []stateBackend    `json:"backends"`
	HealthCheck     stateHealthCheck  `json:"healthCheck"`
	SourceRanges    []string          `json:"sourceRanges"`
	SessionAffinity stateAffinity     `json:"sessionAffinity"`
	Settings        map[string]string `json:"settings,omitempty"`
	BackendKey      string            `json:"backendKey,omitempty"`
	BackendPool     string            `json:"backendPool,omitempty"`
	ListenerPools   bool              `json:"listenerPools,omitempty"`
	VIPs            []string          `json:"vips"`
	Ingress         []stateIngress    `json:"ingress"`
	// Provisioning is always false in a state file, where ReadyAt decides.
	Provisioning bool      `json:"provisioning,omitempty"`
	ReadyAt      time.Time `json:"readyAt,omitzero"`
	BusyUntil    time.Time `json:"busyUntil,omitzero"`
}

// stateListener is a listener as a state file keeps it: with its node
// port as it was set (not as reported: a hierarchical cloud reports 0 for
// a pool without members) and, on a hierarchical cloud, its ID and pool.
type stateListener struct {
	Family      string             `json:"family"`
	Protocol    string             `json:"protocol"`
	Port        int32              `json:"port"`
	NodePort    int32              `json:"nodePort"`
	AppProtocol string             `json:"appProtocol,omitempty"`
	Settings    map[string]string  `json:"settings,omitempty"`
	ID          string             `json:"id,omitempty"`
	Pool        *stateListenerPool `json:"pool,omitempty"`
}

// stateListenerPool is a listener's pool (loadbalancer.ListenerPool): its
// ID, members and health monitor (absent: none).
type stateListenerPool struct {
	ID          string            `json:"id,omitempty"`
	Backends    []stateBackend    `json:"backends"`
	HealthCheck *stateHealthCheck `json:"healthCheck,omitempty"`
}

type stateBackend struct {
	NodeName   string `json:"nodeName,omitempty"`
	ProviderID string `json:"providerID"`
	IPv4       string `json:"ipv4,omitempty"`
	IPv6       string `json:"ipv6,omitempty"`
}

type stateHealthCheck struct {
	Protocol string `json:"protocol"`
	Port     int32  `json:"port"`
	Path     string `json:"path"`
}

type stateAffinity struct {
	ClientIP       bool  `json:"clientIP"`
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

type stateIngress struct {
	IP       string `json:"ip,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	IPMode   string `json:"ipMode,omitempty"`
}

// storedLoadBalancer returns r in its state-file form.
func storedLoadBalancer(r fake.SavedLoadBalancer) stateLB {
	lb, spec := r.LoadBalancer, r.LoadBalancer.Spec
	out := stateLB{
		ID: lb.ID, Name: lb.Name, Tags: map[string]string{}, BackendKey: string(spec.BackendKey), BackendPool: spec.BackendPool, ReadyAt: r.ReadyAt,
		ListenerPools: spec.ListenerPools, BusyUntil: r.BusyUntil,
		IPFamilies: []string{}, Listeners: []stateListener{}, Backends: []stateBackend{}, SourceRanges: []string{},
		VIPs: []string{}, Ingress: []stateIngress{},
		HealthCheck:     storedHealthCheck(spec.HealthCheck),
		SessionAffinity: stateAffinity{ClientIP: spec.SessionAffinity.ClientIP, TimeoutSeconds: spec.SessionAffinity.TimeoutSeconds},
	}
	maps.Copy(out.Tags, lb.Tags)
	for _, f := range spec.IPFamilies {
		out.IPFamilies = append(out.IPFamilies, string(f))
	}
	for _, ip := range spec.RequestedIPs {
		out.RequestedIPs = append(out.RequestedIPs, ip.String())
	}
	for _, l := range spec.Listeners {
		out.Listeners = append(out.Listeners, storedListener(l))
	}
	out.Backends = storedBackends(spec.Backends)
	for _, p := range spec.SourceRanges {
		out.SourceRanges = append(out.SourceRanges, p.String())
	}
	if len(spec.Settings) > 0 {
		out.Settings = maps.Clone(spec.Settings)
	}
	for _, ip := range r.VIPs {
		out.VIPs = append(out.VIPs, ip.String())
	}
	for _, in := range lb.Ingress {
		out.Ingress = append(out.Ingress, stateIngress{IP: in.IP, Hostname: in.Hostname, IPMode: string(in.IPMode)})
	}
	return out
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// record parses a load balancer of a state file (storedLoadBalancer) back
// into its stored form. Empty lists become nil. Every problem found is
// reported, joined in field order.
func (v stateLB) record() (fake.SavedLoadBalancer, error) {
	var d lbDecoder
	lb := &loadbalancer.LoadBalancer{ID: v.ID, Name: v.Name, Tags: maps.Clone(v.Tags)}
	v.decodeSpec(&d, &lb.Spec)
	rec := fake.SavedLoadBalancer{LoadBalancer: lb}
	for i, str := range v.VIPs {
		rec.VIPs = append(rec.VIPs, d.addr("vips", i, str))
	}
	for _, in := range v.Ingress {
		lb.Ingress = append(lb.Ingress, loadbalancer.Ingress{IP: in.IP, Hostname: in.Hostname, IPMode: v1.LoadBalancerIPMode(in.IPMode)})
	}
	lb.Spec.BackendKey = d.backendKey(v.BackendKey)
	rec.ReadyAt, rec.BusyUntil = v.ReadyAt, v.BusyUntil
	if v.Provisioning {
		d.errs = append(d.errs, errors.New("provisioning true: expected it absent in a state file, where readyAt says when the load balancer is ready"))
	}
	if err := errors.Join(d.errs...); err != nil {
		return fake.SavedLoadBalancer{}, err
	}
	return rec, nil
}

// decodeSpec parses the Spec of v into s (all but its BackendKey, which
// record parses after the VIPs, to report problems in field order), noting
// problems in d.
func (v stateLB) decodeSpec(d *lbDecoder, s *loadbalancer.Spec) {
	for _, f := range v.IPFamilies {
		s.IPFamilies = append(s.IPFamilies, v1.IPFamily(f))
	}
	for i, str := range v.RequestedIPs {
		s.RequestedIPs = append(s.RequestedIPs, d.addr("requestedIPs", i, str))
	}
	for _, l := range v.Listeners {
		s.Listeners = append(s.Listeners, d.listener(l))
	}
	s.Backends = d.backends(v.Backends)
	s.BackendPool = v.BackendPool
	s.ListenerPools = v.ListenerPools
	s.HealthCheck = v.HealthCheck.healthCheck()
	for i, str := range v.SourceRanges {
		p, err := netip.ParsePrefix(str)
		if err != nil {
			d.errs = append(d.errs, fmt.Errorf("sourceRanges[%d] %q: expected a CIDR", i, str))
		}
		s.SourceRanges = append(s.SourceRanges, p)
	}
	s.SessionAffinity = loadbalancer.SessionAffinity{ClientIP: v.SessionAffinity.ClientIP, TimeoutSeconds: v.SessionAffinity.TimeoutSeconds}
	if len(v.Settings) > 0 {
		s.Settings = maps.Clone(v.Settings)
	}
}

// lbDecoder parses the text fields of one stateLB, noting each problem in
// errs (naming the field, the value and what was expected) and going on,
// so that record reports them all. The zero value is ready to use.
type lbDecoder struct{ errs []error }

// addr parses str, element i of the list name, as an IP address; the zero
// Addr when it is not one.
func (d *lbDecoder) addr(name string, i int, str string) netip.Addr {
	a, err := netip.ParseAddr(str)
	if err != nil {
		d.errs = append(d.errs, fmt.Errorf("%s[%d] %q: expected an IP address", name, i, str))
	}
	return a
}

// optAddr is addr for an optional address: empty is the zero Addr.
func (d *lbDecoder) optAddr(name string, i int, str string) netip.Addr {
	if str == "" {
		return netip.Addr{}
	}
	return d.addr(name, i, str)
}

// backendKey parses a load balancer's backend key; "" (by Node name) when
// it is not one.
func (d *lbDecoder) backendKey(str string) loadbalancer.BackendKey {
	switch k := loadbalancer.BackendKey(str); k {
	case loadbalancer.BackendKeyNodeName, loadbalancer.BackendKeyProviderID, loadbalancer.BackendKeyAddress:
		return k
	}
	d.errs = append(d.errs, fmt.Errorf("backendKey %q: expected \"\", %q or %q", str, loadbalancer.BackendKeyProviderID, loadbalancer.BackendKeyAddress))
	return ""
}

// storedHealthCheck returns hc in its state-file form.
func storedHealthCheck(hc loadbalancer.HealthCheck) stateHealthCheck {
	return stateHealthCheck{Protocol: string(hc.Protocol), Port: hc.Port, Path: hc.Path}
}

// healthCheck parses a health check of a state file (storedHealthCheck).
func (hc stateHealthCheck) healthCheck() loadbalancer.HealthCheck {
	return loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckProtocol(hc.Protocol), Port: hc.Port, Path: hc.Path}
}

// storedListener returns l in its state-file form, with its pool.
func storedListener(l loadbalancer.Listener) stateListener {
	out := stateListener{Family: string(l.Family), Protocol: string(l.Protocol), Port: l.Port, NodePort: l.NodePort,
		AppProtocol: l.AppProtocol, Settings: maps.Clone(l.Settings), ID: l.ID}
	if p := l.Pool; p != nil {
		out.Pool = &stateListenerPool{ID: p.ID, Backends: storedBackends(p.Backends)}
		if p.HealthCheck != nil {
			hc := storedHealthCheck(*p.HealthCheck)
			out.Pool.HealthCheck = &hc
		}
	}
	return out
}

// listener parses a listener of a state file (storedListener), noting
// problems of its pool's members in d.
func (d *lbDecoder) listener(l stateListener) loadbalancer.Listener {
	out := loadbalancer.Listener{
		ListenerKey: loadbalancer.ListenerKey{Family: v1.IPFamily(l.Family), Protocol: v1.Protocol(l.Protocol), Port: l.Port},
		NodePort:    l.NodePort, AppProtocol: l.AppProtocol, Settings: maps.Clone(l.Settings), ID: l.ID,
	}
	if p := l.Pool; p != nil {
		out.Pool = &loadbalancer.ListenerPool{ID: p.ID, Backends: d.backends(p.Backends)}
		if p.HealthCheck != nil {
			hc := p.HealthCheck.healthCheck()
			out.Pool.HealthCheck = &hc
		}
	}
	return out
}

// storedBackends returns bs in their state-file form (an empty list for
// none).
func storedBackends(bs []loadbalancer.Backend) []stateBackend {
	out := make([]stateBackend, 0, len(bs))
	for _, b := range bs {
		out = append(out, stateBackend{NodeName: b.NodeName, ProviderID: b.ProviderID, IPv4: addrString(b.IPv4), IPv6: addrString(b.IPv6)})
	}
	return out
}

// backends parses the backends of a state file (storedBackends).
func (d *lbDecoder) backends(bs []stateBackend) []loadbalancer.Backend {
	var out []loadbalancer.Backend
	for i, b := range bs {
		out = append(out, loadbalancer.Backend{
			NodeName: b.NodeName, ProviderID: b.ProviderID,
			IPv4: d.optAddr("backends.ipv4", i, b.IPv4), IPv6: d.optAddr("backends.ipv6", i, b.IPv6),
		})
	}
	return out
}

// storedBackendPool returns p in its state-file form.
func storedBackendPool(p *loadbalancer.Pool) stateBackendPool {
	out := stateBackendPool{ID: p.ID, Name: p.Name, Tags: map[string]string{}, IPFamilies: []string{},
		Backends: storedBackends(p.Spec.Backends), BackendKey: string(p.Spec.BackendKey)}
	maps.Copy(out.Tags, p.Tags)
	for _, f := range p.Spec.IPFamilies {
		out.IPFamilies = append(out.IPFamilies, string(f))
	}
	return out
}

// pool parses a backend pool of a state file (storedBackendPool).
func (v stateBackendPool) pool() (*loadbalancer.Pool, error) {
	var d lbDecoder
	p := &loadbalancer.Pool{ID: v.ID, Name: v.Name, Tags: maps.Clone(v.Tags)}
	for _, f := range v.IPFamilies {
		p.Spec.IPFamilies = append(p.Spec.IPFamilies, v1.IPFamily(f))
	}
	p.Spec.Backends = d.backends(v.Backends)
	p.Spec.BackendKey = d.backendKey(v.BackendKey)
	if err := errors.Join(d.errs...); err != nil {
		return nil, err
	}
	return p, nil
}
