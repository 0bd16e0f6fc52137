package fake

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/internal/netaddr"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/routes"
)

// The control surface: what a test (or the admin endpoint, package
// fake/admin) does to the cloud
// behind the provider's back. These methods are not cloud API calls: they
// are not counted and never fail with injected faults. The provider sees
// changes to instances at its next look-up (the control surface drops the
// instance cache). With Config.StateFile they act on the shared cloud: a
// change is saved before the method returns, and what they return is read
// from the file's current state.

// AddInstance creates an instance (see Instance for the defaults) and
// returns it as stored. It returns an error naming each bad field, its
// value and what was expected, or naming a taken ID or an exhausted
// network, or wrapping ErrStateFile.
func (c *Cloud) AddInstance(in Instance) (Instance, error) {
	return c.AddInstanceContext(context.Background(), in)
}

// AddInstanceContext is AddInstance, waiting for a state file's lock at
// most until ctx ends (its error then wraps ErrStateFile and ctx.Err());
// AddInstance waits without a deadline. The other …Context methods of the
// control surface are the same for theirs.
func (c *Cloud) AddInstanceContext(ctx context.Context, in Instance) (Instance, error) {
	return c.store.createInstance(ctx, in)
}

// SetInstanceStateContext moves instance id to state, as StopInstance,
// StartInstance and TerminateInstance do (with their errors), waiting for
// a state file's lock at most until ctx ends.
func (c *Cloud) SetInstanceStateContext(ctx context.Context, id string, state instances.State) (Instance, error) {
	return c.store.setState(ctx, id, state)
}

// RemoveInstanceContext forgets instance id and frees its addresses (its
// look-ups then find nothing), waiting for a state file's lock at most
// until ctx ends. It returns an error wrapping ErrNotFound for an unknown
// instance, or one wrapping ErrStateFile.
func (c *Cloud) RemoveInstanceContext(ctx context.Context, id string) error {
	return c.store.removeInstance(ctx, id)
}

// StopInstance shuts instance id down: the provider reports it shut down
// (the node gets the shutdown taint) but existing. Stopping a stopped
// instance is a no-op. It returns an error for an unknown or terminated
// instance, or one wrapping ErrStateFile.
func (c *Cloud) StopInstance(id string) (Instance, error) {
	return c.store.setState(context.Background(), id, instances.StateStopped)
}

// StartInstance runs a stopped instance again; starting a running one is a
// no-op. It returns an error for an unknown or terminated instance, or one
// wrapping ErrStateFile.
func (c *Cloud) StartInstance(id string) (Instance, error) {
	return c.store.setState(context.Background(), id, instances.StateRunning)
}

// TerminateInstance terminates instance id for good: the provider reports
// it gone (the node-lifecycle controller deletes the Node) while the cloud
// still lists it as terminated. It returns an error for an unknown
// instance, or one wrapping ErrStateFile.
func (c *Cloud) TerminateInstance(id string) (Instance, error) {
	return c.store.setState(context.Background(), id, instances.StateTerminated)
}

// InstanceByID returns a copy of instance id. With Config.StateFile, when
// the file cannot be read it logs the error and answers from the state last
// loaded (the admin endpoint answers 500 instead).
func (c *Cloud) InstanceByID(id string) (Instance, bool) {
	in, ok, err := c.InstanceByIDContext(context.Background(), id)
	if err != nil {
		logStale(err)
		in, ok = c.store.staleInstance(id)
	}
	return in, ok
}

// InstanceByIDContext is InstanceByID, but for a state file error, which
// it returns (wrapping ErrStateFile) instead of the state last loaded,
// waiting for the file's lock at most until ctx ends.
func (c *Cloud) InstanceByIDContext(ctx context.Context, id string) (Instance, bool, error) {
	return c.store.instance(ctx, id)
}

// ResetCalls sets every call counter (Calls) back to zero. Safe for
// concurrent use.
func (c *Cloud) ResetCalls() { c.resetCalls() }

// Snapshot returns a copy of the whole cloud (see State for the order).
// With Config.StateFile it is the shared cloud; when the file cannot be
// read it logs the error and returns the state last loaded (the admin
// endpoint's GET /state reports the error instead).
func (c *Cloud) Snapshot() State {
	st, err := c.store.snapshot(context.Background(), c.cfg.ClusterID)
	if err != nil {
		logStale(err)
		st = c.store.staleSnapshot(c.cfg.ClusterID)
	}
	return st
}

// SnapshotContext is Snapshot, but for a state file error, which it
// returns (wrapping ErrStateFile) instead of the state last loaded, and
// waiting for the file's lock at most until ctx ends (its error then also
// wraps ctx.Err()).
func (c *Cloud) SnapshotContext(ctx context.Context) (State, error) {
	return c.store.snapshot(ctx, c.cfg.ClusterID)
}

// logStale logs a state file error of a control-surface method that has no
// error result.
func logStale(err error) {
	klog.ErrorS(err, "Fake cloud: answering from the state last loaded")
}

// LoadBalancerFor returns the load balancer this Cloud's Reconciler keeps
// for svc when the controllers pass clusterName (--cluster-name): the one
// owned, by the ownership tags, by svc in this Cloud's Config.ClusterID,
// or in clusterName when the Cloud has no ClusterID. It is reported as
// Snapshot reports it, and false when there is none or svc is nil. With
// several, it returns the lowest ID. With Config.StateFile, when the file
// cannot be read it logs the error and returns false.
func (c *Cloud) LoadBalancerFor(clusterName string, svc *v1.Service) (LoadBalancer, bool) {
	if svc == nil {
		return LoadBalancer{}, false
	}
	owner := loadbalancer.OwnerOf(cmp.Or(c.cfg.ClusterID, clusterName), svc)
	var out LoadBalancer
	var found bool
	err := c.store.read(func() error {
		for _, id := range slices.SortedFunc(maps.Keys(c.store.lbUIDs[string(owner.UID)]), compareIDs) {
			if r := c.store.lbs[id]; owner.Owns(r.lb.Tags) {
				out, found = viewLoadBalancer(r, c.store.now()), true
				return nil
			}
		}
		return nil
	})
	if err != nil {
		klog.ErrorS(err, "Fake cloud: LoadBalancerFor")
		return LoadBalancer{}, false
	}
	return out, found
}

// AddRoute puts r in the route table as is, for example a route of no
// cluster (Cluster "") that the provider must never touch, such as a
// default route, or a stale route of a deleted node; its
// TargetNodeAddresses are stored as InternalIP addresses. r must keep the
// route table's rules (see Route): otherwise nothing
// changes and the error names the field, its value (cut to a bounded
// length) and what was expected, wrapping routes.ErrInvalidRoute (a field,
// a name the cluster already has) or routes.ErrCIDRInUse (a destination
// overlapping another cluster route's). It returns an error wrapping
// ErrStateFile when the shared state file fails.
func (c *Cloud) AddRoute(r Route) error {
	e := routes.Entry{Name: r.Name, Cluster: r.Cluster, DestinationCIDR: r.DestinationCIDR, TargetNode: types.NodeName(r.TargetNode)}
	for i, a := range r.TargetNodeAddresses {
		// An address is stored as an InternalIP: it must be an IP.
		ip, problem := netaddr.NodeIP(a)
		if problem != "" {
			err := field.Invalid(field.NewPath("route", "targetNodeAddresses").Index(i), clipValue(a), problem)
			return fmt.Errorf("fake: %w", routeError(routes.ErrInvalidRoute, &e, field.ErrorList{err}))
		}
		e.TargetNodeAddresses = append(e.TargetNodeAddresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip.String()})
	}
	return c.store.addRoute(e)
}

// NodeFor returns the Node a kubelet on instance id registers, with what the
// cloud-controller-manager adds once it initialized it: named after the
// instance, with a UID derived from the ID, spec.providerID
// "fake://<id>", the instance's internal addresses and hostname, and the
// hostname, zone, region and instance-type labels (the stable keys only).
// The node controller would also add the instance's ExternalIPs, its Labels
// and the beta topology labels; NodeFor leaves them out. It is a new object
// each time. It returns an error for an unknown instance, or one wrapping
// ErrStateFile.
func (c *Cloud) NodeFor(id string) (*v1.Node, error) {
	in, ok, err := c.store.instance(context.Background(), id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %q", errInstanceNotFound, id)
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
		Spec: v1.NodeSpec{ProviderID: provider.ProviderID{Scheme: codec.Scheme, ID: in.ID}.String()},
	}
	for _, ip := range in.InternalIPs {
		node.Status.Addresses = append(node.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	if in.Hostname != "" {
		node.Status.Addresses = append(node.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: in.Hostname})
	}
	return node, nil
}
