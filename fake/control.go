package fake

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/routes"
)

// The control surface: what a test (or the admin endpoint) does to the cloud
// behind the provider's back. These methods are not cloud API calls: they
// are not counted and never fail with injected faults. The provider sees
// changes to instances at its next look-up (the control surface drops the
// instance cache).

// AddInstance creates an instance (see Instance for the defaults) and
// returns it as stored. Errors wrap ErrInvalidInstance (naming each bad
// field), ErrInstanceExists or ErrPoolExhausted.
func (c *Cloud) AddInstance(in Instance) (Instance, error) { return c.store.addInstance(in) }

// StopInstance shuts instance id down: the provider reports it shut down
// (the node gets the shutdown taint) but existing. Stopping a stopped
// instance is a no-op. Errors wrap ErrInstanceNotFound or
// ErrInstanceTerminated.
func (c *Cloud) StopInstance(id string) (Instance, error) { return c.store.setState(id, StateStopped) }

// StartInstance runs a stopped instance again; starting a running one is a
// no-op. Errors wrap ErrInstanceNotFound or ErrInstanceTerminated.
func (c *Cloud) StartInstance(id string) (Instance, error) { return c.store.setState(id, StateRunning) }

// TerminateInstance terminates instance id for good: the provider reports
// it gone (the node-lifecycle controller deletes the Node) while the cloud
// still lists it as terminated. Errors wrap ErrInstanceNotFound.
func (c *Cloud) TerminateInstance(id string) (Instance, error) {
	return c.store.setState(id, StateTerminated)
}

// RemoveInstance forgets instance id entirely and frees its addresses:
// look-ups then answer "not found". Errors wrap ErrInstanceNotFound.
func (c *Cloud) RemoveInstance(id string) error { return c.store.removeInstance(id) }

// InstanceByID returns a copy of instance id.
func (c *Cloud) InstanceByID(id string) (Instance, bool) { return c.store.instance(id) }

// Snapshot returns a copy of the whole cloud (see State for the order).
func (c *Cloud) Snapshot() State { return c.store.snapshot(c.cfg.ClusterID) }

// LoadBalancerFor returns the load balancer owned by svc in clusterName
// (by the ownership tags, as the loadbalancer.Reconciler finds it), and
// false when there is none or svc is nil. With several, it returns the
// lowest ID.
func (c *Cloud) LoadBalancerFor(clusterName string, svc *v1.Service) (LoadBalancer, bool) {
	if svc == nil {
		return LoadBalancer{}, false
	}
	owner := loadbalancer.OwnerOf(clusterName, svc)
	c.store.mu.RLock()
	defer c.store.mu.RUnlock()
	ids := keys(c.store.lbUIDs[string(owner.UID)])
	slices.SortFunc(ids, compareIDs)
	for _, id := range ids {
		if r := c.store.lbs[id]; owner.Owns(r.lb.Tags) {
			return viewLoadBalancer(r), true
		}
	}
	return LoadBalancer{}, false
}

// AddRoute puts r in the route table as is, for example a route of no
// cluster (Cluster "") that the provider must never touch, or a stale route
// of a deleted node; its TargetNodeAddresses are stored as InternalIP
// addresses. It returns an error naming the field for a
// DestinationCIDR that does not parse or an address that is not an IP.
func (c *Cloud) AddRoute(r Route) error {
	if _, err := netip.ParsePrefix(r.DestinationCIDR); err != nil {
		return fmt.Errorf("fake: Route.DestinationCIDR %q: expected a CIDR", r.DestinationCIDR)
	}
	e := routes.Entry{Name: r.Name, Cluster: r.Cluster, DestinationCIDR: r.DestinationCIDR, TargetNode: types.NodeName(r.TargetNode)}
	for i, a := range r.TargetNodeAddresses {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return fmt.Errorf("fake: Route.TargetNodeAddresses[%d] %q: expected an IP address", i, a)
		}
		typ := v1.NodeInternalIP
		e.TargetNodeAddresses = append(e.TargetNodeAddresses, v1.NodeAddress{Type: typ, Address: ip.String()})
	}
	c.store.addRoute(e)
	return nil
}

// NodeFor returns the Node a kubelet on instance id registers, as the
// cloud-controller-manager leaves it once initialized: named after the
// instance, with a UID derived from the ID, spec.providerID
// "fake://<id>" and the instance's internal addresses, hostname, zone,
// region and type labels. It is a new object each time. Errors wrap
// ErrInstanceNotFound.
func (c *Cloud) NodeFor(id string) (*v1.Node, error) {
	in, ok := c.store.instance(id)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrInstanceNotFound, id)
	}
	b := sha256.Sum256([]byte(in.ID))
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80 // a version-4 UUID shape
	uid := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: in.Name,
			UID:  types.UID(uid),
			Labels: map[string]string{
				v1.LabelHostname:           in.Name,
				v1.LabelInstanceTypeStable: in.Type,
				v1.LabelTopologyZone:       in.Zone,
				v1.LabelTopologyRegion:     in.Region,
			},
		},
		Spec: v1.NodeSpec{ProviderID: ProviderName + "://" + in.ID},
	}
	for _, ip := range in.InternalIPs {
		node.Status.Addresses = append(node.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	if in.Hostname != "" {
		node.Status.Addresses = append(node.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: in.Hostname})
	}
	return node, nil
}
