package fake

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/routes"
)

// Errors of the control surface. They are wrapped with the instance ID;
// branch with errors.Is.
var (
	// ErrInstanceNotFound: no instance has this ID.
	ErrInstanceNotFound = errors.New("fake: instance not found")
	// ErrInstanceExists: AddInstance with an ID that is taken.
	ErrInstanceExists = errors.New("fake: instance ID already exists")
	// ErrInstanceTerminated: starting or stopping a terminated instance.
	ErrInstanceTerminated = errors.New("fake: instance is terminated")
	// ErrInvalidInstance: AddInstance with invalid fields (the error
	// names each field, its value and what was expected).
	ErrInvalidInstance = errors.New("fake: invalid instance")
)

// store is the fake cloud's state. Every field is guarded by mu.
type store struct {
	mu sync.RWMutex

	instances    map[string]*Instance // by ID; values are replaced, never mutated
	instByName   index                // name → IDs
	instIPs      map[netip.Addr]string
	instPools    []*pool // at most one per family
	nextInstance int
	// onInstanceChange, when set, is called (with mu held) after every
	// change of an instance: the Cloud drops its instance cache there.
	onInstanceChange func()

	lbs     map[string]*lbRecord // by ID
	lbNames index                // name → IDs
	lbUIDs  index                // loadbalancer.TagServiceUID value → IDs
	lbPools map[bool]*pool       // by Is4
	lbCfg   LoadBalancerConfig
	nextLB  int

	routes   []routes.Entry // replaced as a whole, never mutated
	routeRev uint64
}

// lbRecord is a stored load balancer: the model and its VIPs.
type lbRecord struct {
	lb   *loadbalancer.LoadBalancer
	vips []netip.Addr // one per family, in lb.Spec.IPFamilies order
}

// index maps a key to a set of IDs.
type index map[string]map[string]struct{}

func (ix index) add(key, id string) {
	if ix[key] == nil {
		ix[key] = map[string]struct{}{}
	}
	ix[key][id] = struct{}{}
}

func (ix index) remove(key, id string) {
	delete(ix[key], id)
	if len(ix[key]) == 0 {
		delete(ix, key)
	}
}

// newStore builds the state of cfg (with defaults applied): pools, then
// the seeded instances in order.
func newStore(cfg Config) (*store, error) {
	s := &store{
		instances: map[string]*Instance{}, instByName: index{}, instIPs: map[netip.Addr]string{},
		lbs: map[string]*lbRecord{}, lbNames: index{}, lbUIDs: index{}, lbPools: map[bool]*pool{},
		lbCfg: cfg.LoadBalancers,
	}
	for _, c := range cfg.InstanceCIDRs {
		p, err := newPool(c)
		if err != nil {
			return nil, fmt.Errorf("fake: instanceCIDRs: %w", err)
		}
		s.instPools = append(s.instPools, p)
	}
	for _, c := range []string{cfg.LoadBalancers.IPv4Pool, cfg.LoadBalancers.IPv6Pool} {
		p, err := newPool(c)
		if err != nil {
			return nil, fmt.Errorf("fake: loadBalancers: %w", err)
		}
		s.lbPools[p.prefix.Addr().Is4()] = p
	}
	for i, in := range cfg.Instances {
		if _, err := s.addInstance(in); err != nil {
			return nil, fmt.Errorf("fake: instances[%d]: %w", i, err)
		}
	}
	return s, nil
}

// addInstance validates in, fills in the defaults and stores it.
func (s *store) addInstance(in Instance) (Instance, error) {
	if errs := in.validate(field.NewPath("instance")); len(errs) > 0 {
		return Instance{}, fmt.Errorf("%w: %w", ErrInvalidInstance, errs.ToAggregate())
	}
	in = in.clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.ID == "" {
		for in.ID == "" || s.instances[in.ID] != nil {
			s.nextInstance++
			in.ID = "i-" + strconv.Itoa(s.nextInstance)
		}
	} else if s.instances[in.ID] != nil {
		return Instance{}, fmt.Errorf("%w: %q", ErrInstanceExists, in.ID)
	}
	in.Zone = cmp.Or(in.Zone, DefaultZone)
	in.Region = cmp.Or(in.Region, DefaultRegion)
	in.Type = cmp.Or(in.Type, DefaultInstanceType)
	in.State = cmp.Or(in.State, StateRunning)
	if in.Hostname == "" && len(validation.IsDNS1123Subdomain(in.Name)) == 0 {
		in.Hostname = in.Name
	}
	ips, err := s.instanceIPs(in)
	if err != nil {
		return Instance{}, err
	}
	in.InternalIPs = make([]string, len(ips))
	for i, ip := range ips {
		in.InternalIPs[i] = ip.String()
		s.instIPs[ip] = in.ID
	}
	for i, e := range in.ExternalIPs {
		in.ExternalIPs[i] = netip.MustParseAddr(e).String() // validated
	}
	s.instances[in.ID] = &in
	s.instByName.add(in.Name, in.ID)
	s.instanceChanged()
	return in.clone(), nil
}

// instanceIPs reserves the internal addresses of in: the given ones, or
// the next free address of each instance pool. Nothing is reserved on
// error.
func (s *store) instanceIPs(in Instance) ([]netip.Addr, error) {
	var ips []netip.Addr
	undo := func() {
		for _, ip := range ips {
			s.releaseInstanceIP(ip)
		}
	}
	if len(in.InternalIPs) == 0 {
		for _, p := range s.instPools {
			ip, err := p.allocate()
			if err != nil {
				undo()
				return nil, fmt.Errorf("instance %q: internal IP: %w", in.Name, err)
			}
			ips = append(ips, ip)
		}
		return ips, nil
	}
	for _, str := range in.InternalIPs {
		ip := netip.MustParseAddr(str) // validated
		if owner, taken := s.instIPs[ip]; taken {
			undo()
			return nil, fmt.Errorf("%w: internalIPs: %s is the address of instance %q; expected a free address", ErrInvalidInstance, ip, owner)
		}
		for _, p := range s.instPools {
			if p.contains(ip) {
				if err := p.take(ip); err != nil {
					undo()
					return nil, fmt.Errorf("%w: internalIPs: %w", ErrInvalidInstance, err)
				}
			}
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

func (s *store) releaseInstanceIP(ip netip.Addr) {
	for _, p := range s.instPools {
		if p.contains(ip) {
			p.release(ip)
		}
	}
}

// setState moves instance id to state, following the allowed transitions.
func (s *store) setState(id string, state InstanceState) (Instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[id]
	if in == nil {
		return Instance{}, fmt.Errorf("%w: %q", ErrInstanceNotFound, id)
	}
	if in.State == StateTerminated && state != StateTerminated {
		return Instance{}, fmt.Errorf("%w: %q cannot become %s", ErrInstanceTerminated, id, state)
	}
	next := in.clone()
	next.State = state
	s.instances[id] = &next
	s.instanceChanged()
	return next.clone(), nil
}

// removeInstance forgets instance id and frees its addresses.
func (s *store) removeInstance(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[id]
	if in == nil {
		return fmt.Errorf("%w: %q", ErrInstanceNotFound, id)
	}
	for _, str := range in.InternalIPs {
		ip := netip.MustParseAddr(str)
		delete(s.instIPs, ip)
		s.releaseInstanceIP(ip)
	}
	delete(s.instances, id)
	s.instByName.remove(in.Name, id)
	s.instanceChanged()
	return nil
}

// instanceChanged reports a change of an instance to onInstanceChange.
func (s *store) instanceChanged() {
	if s.onInstanceChange != nil {
		s.onInstanceChange()
	}
}

func (s *store) instance(id string) (Instance, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	in := s.instances[id]
	if in == nil {
		return Instance{}, false
	}
	return in.clone(), true
}

// snapshot copies the whole state.
func (s *store) snapshot(clusterID string) State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := State{ClusterID: clusterID, Instances: []Instance{}, LoadBalancers: []LoadBalancer{}, Routes: []Route{}}
	for _, in := range s.instances {
		st.Instances = append(st.Instances, in.clone())
	}
	slices.SortFunc(st.Instances, func(a, b Instance) int { return compareIDs(a.ID, b.ID) })
	for _, r := range s.lbs {
		st.LoadBalancers = append(st.LoadBalancers, viewLoadBalancer(r))
	}
	slices.SortFunc(st.LoadBalancers, func(a, b LoadBalancer) int { return compareIDs(a.ID, b.ID) })
	for _, e := range s.routes {
		st.Routes = append(st.Routes, viewRoute(e))
	}
	slices.SortFunc(st.Routes, func(a, b Route) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.DestinationCIDR, b.DestinationCIDR), cmp.Compare(a.Name, b.Name))
	})
	for _, p := range s.instPools {
		st.Pools = append(st.Pools, p.usage("instances"))
	}
	for _, is4 := range []bool{true, false} {
		st.Pools = append(st.Pools, s.lbPools[is4].usage("loadBalancers"))
	}
	return st
}

// compareIDs orders "i-2" before "i-10": by length, then bytes.
func compareIDs(a, b string) int {
	return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b))
}

func viewRoute(e routes.Entry) Route {
	r := Route{Cluster: e.Cluster, Name: e.Name, DestinationCIDR: e.DestinationCIDR, TargetNode: string(e.TargetNode)}
	for _, a := range e.TargetNodeAddresses {
		r.TargetNodeAddresses = append(r.TargetNodeAddresses, a.Address)
	}
	return r
}

func viewLoadBalancer(r *lbRecord) LoadBalancer {
	lb, spec := r.lb, r.lb.Spec
	out := LoadBalancer{
		ID: lb.ID, Name: lb.Name, Tags: map[string]string{},
		IPFamilies: []string{}, Listeners: []Listener{}, Backends: []Backend{}, SourceRanges: []string{},
		VIPs: []string{}, Ingress: []Ingress{},
		HealthCheck:     HealthCheck{Protocol: string(spec.HealthCheck.Protocol), Port: spec.HealthCheck.Port, Path: spec.HealthCheck.Path},
		SessionAffinity: SessionAffinity{ClientIP: spec.SessionAffinity.ClientIP, TimeoutSeconds: spec.SessionAffinity.TimeoutSeconds},
	}
	for k, v := range lb.Tags {
		out.Tags[k] = v
	}
	for _, f := range spec.IPFamilies {
		out.IPFamilies = append(out.IPFamilies, string(f))
	}
	for _, ip := range spec.RequestedIPs {
		out.RequestedIPs = append(out.RequestedIPs, ip.String())
	}
	for _, l := range spec.Listeners {
		out.Listeners = append(out.Listeners, Listener{Family: string(l.Family), Protocol: string(l.Protocol), Port: l.Port, NodePort: l.NodePort})
	}
	for _, b := range spec.Backends {
		out.Backends = append(out.Backends, Backend{NodeName: b.NodeName, ProviderID: b.ProviderID, IPv4: addrString(b.IPv4), IPv6: addrString(b.IPv6)})
	}
	for _, p := range spec.SourceRanges {
		out.SourceRanges = append(out.SourceRanges, p.String())
	}
	if len(spec.Settings) > 0 {
		out.Settings = make(map[string]string, len(spec.Settings))
		for k, v := range spec.Settings {
			out.Settings[k] = v
		}
	}
	for _, ip := range r.vips {
		out.VIPs = append(out.VIPs, ip.String())
	}
	for _, in := range lb.Ingress {
		out.Ingress = append(out.Ingress, Ingress{IP: in.IP, Hostname: in.Hostname, IPMode: string(in.IPMode)})
	}
	return out
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
