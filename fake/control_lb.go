package fake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ccmkit/ccmkit/fake/internal/lbcheck"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// The load-balancer edits of the control surface: what a user does to the
// cloud's load balancers in its console, behind the provider's back, to
// make drift for the provider to repair, or to seed load balancers the
// provider did not create (another cluster's, or ones without ccmkit
// tags). Like the rest of the control surface they act on the store
// directly: they are not cloud API calls, so they are not counted
// (Calls), rate limited, failed by faults (AddFault) or intercepted
// (Funcs). Each change goes through loadbalancer.Apply (store.applyLB), the reference semantics of
// the matching loadbalancer.Action, in one transaction: on error nothing
// changes. With Config.StateFile the change is saved before the method
// returns.
//
// The provider is not told, as a real cloud does not tell it: a Cloud's
// load-balancer cache (loadbalancer.Cache) keeps what it listed until
// loadBalancerCacheTTL passes or the cache is dropped (DELETE /faults,
// SetInterceptor), so its Reconciler sees an edit at its first list after
// that. A Cloud in another process (Config.StateFile) drops its cache when
// it finds the file changed, as for any change another process makes.

// Errors of the load-balancer edits; the admin endpoint maps them to
// their statuses by kind (ErrInvalid, ErrNotFound). A load balancer that does not exist is
// loadbalancer.ErrNotFound, wrapped.
var (
	// errInvalidLoadBalancer: CreateLoadBalancer with invalid fields (the
	// error names each field, its value and what was expected), or input
	// the cloud refuses (a requested IP outside its pool or taken, a
	// backend pool that does not exist).
	errInvalidLoadBalancer = kindOf(ErrInvalid, "fake: invalid load balancer")
	// errInvalidListener: RemoveListener with a protocol or port no
	// listener can have.
	errInvalidListener = kindOf(ErrInvalid, "fake: invalid listener")
	// errListenerNotFound: the load balancer has no listener of the
	// protocol and port.
	errListenerNotFound = kindOf(ErrNotFound, "fake: listener not found")
	// errBackendNotFound: the load balancer (or backend pool) has no
	// backend of the key.
	errBackendNotFound = kindOf(ErrNotFound, "fake: backend not found")
	// errBackendPoolNotFound: no shared backend pool has the ID.
	errBackendPoolNotFound = kindOf(ErrNotFound, "fake: backend pool not found")
)

// CreateLoadBalancer creates a load balancer as a user would in the
// cloud's console: lb's Name, Tags and Spec, with an ID assigned as the
// cloud assigns them ("lb-<n>"), a VIP of each of Spec.IPFamilies from the
// pools (Spec.RequestedIPs when set) and, with a provisioning delay, no
// ingress until it is ready, as for a load balancer the provider creates.
// It returns the load balancer as Snapshot reports it. For example, tag it
// with another cluster's loadbalancer.TagCluster, or with no ccmkit tag,
// to check that the provider leaves it alone.
//
// lb must have no ID and no Ingress (the cloud assigns them), a Name that
// is a DNS-1123 subdomain, tag keys of 1 to 128 bytes and values of at most
// 256 bytes (valid UTF-8, no control characters), a non-empty
// loadbalancer.TagCluster when it has that tag (no cluster is named ""),
// one or two distinct Spec.IPFamilies, listeners of those families with
// protocol TCP, UDP or SCTP, a port from 1 to 65535, a node port from 0 to
// 65535 and distinct keys, no node port shared by listeners of one
// protocol but different ports (as Kubernetes refuses for a Service's
// ports; listeners of one port in each IP family, and a TCP and a UDP
// listener, may share one), and backends with distinct keys under the cloud's backend key
// (Spec.BackendKey empty or that key: a Node name, or with
// LoadBalancerSection.Backends instanceID a provider ID naming a live
// instance). Otherwise nothing changes and it returns an error naming each
// field, its value and what was expected; it also refuses a requested IP
// outside its pool or taken, and a Spec.BackendPool that does not exist.
// It returns an error wrapping the pools' exhaustion when a family has no
// free VIP, or wrapping ErrStateFile.
func (c *Cloud) CreateLoadBalancer(lb loadbalancer.LoadBalancer) (LoadBalancer, error) {
	return c.CreateLoadBalancerContext(context.Background(), lb)
}

// RemoveListener removes the listeners of load balancer id with protocol
// and port, of every IP family (a dual-stack load balancer has one per
// family), as a user deleting a listener in the cloud's console, and
// returns the load balancer as Snapshot reports it. It returns an error
// wrapping loadbalancer.ErrNotFound for an unknown id, one naming the
// listeners the load balancer has when none matches, one naming the
// protocol or port when no listener can have it (not TCP, UDP or SCTP; not
// 1 to 65535), or one wrapping ErrStateFile.
func (c *Cloud) RemoveListener(id string, protocol v1.Protocol, port int32) (LoadBalancer, error) {
	return c.RemoveListenerContext(context.Background(), id, protocol, port)
}

// RemoveBackend removes the backends of load balancer id whose key is key
// — the Node name, or with LoadBalancerSection.Backends instanceID the
// provider ID ("fake://<instance ID>"): what the cloud keeps of a backend
// — as a user deregistering a target in the cloud's console (on a
// hierarchical cloud, from the first listener pool that has it: one pool
// only), and returns
// the load balancer as Snapshot reports it. It returns an error wrapping
// loadbalancer.ErrNotFound for an unknown id, one naming the load
// balancer's backends when none has the key (and, for a load balancer
// that sends traffic to a shared backend pool, the pool, whose members
// RemoveBackendPoolMember removes), one for an empty key, or one wrapping
// ErrStateFile.
func (c *Cloud) RemoveBackend(id, key string) (LoadBalancer, error) {
	return c.RemoveBackendContext(context.Background(), id, key)
}

// RemoveBackendPoolMember removes the members of the shared backend pool
// poolID (LoadBalancerSection.BackendPools shared) whose key is key, as
// RemoveBackend does for a load balancer's own backends, and returns the
// pool as Snapshot reports it: every load balancer referencing the pool
// loses the backend. It returns an error for an unknown pool or when no
// member has the key, naming them, or one wrapping ErrStateFile.
func (c *Cloud) RemoveBackendPoolMember(poolID, key string) (loadbalancer.Pool, error) {
	return c.RemoveBackendPoolMemberContext(context.Background(), poolID, key)
}

// CreateLoadBalancerContext is CreateLoadBalancer, waiting for a state
// file's lock at most until ctx ends (its error then wraps ErrStateFile and
// ctx.Err()); CreateLoadBalancer waits without a deadline.
func (c *Cloud) CreateLoadBalancerContext(ctx context.Context, lb loadbalancer.LoadBalancer) (out LoadBalancer, err error) {
	key := c.lbCaps.BackendKey
	if errs := lbcheck.LoadBalancer(field.NewPath("loadBalancer"), &lb, key); len(errs) > 0 {
		return LoadBalancer{}, fmt.Errorf("%w: %w", errInvalidLoadBalancer, errs.ToAggregate())
	}
	lb.Spec.BackendKey = key
	a := loadbalancer.Action{Kind: loadbalancer.ActionCreate, Reason: "created through the control surface", Create: &lb}
	err = c.store.writeCtx(ctx, func() (bool, error) {
		r, err := c.store.applyLB(a)
		if err != nil {
			return false, refusedLB(err)
		}
		out = viewLoadBalancer(r, c.store.now())
		return true, nil
	})
	return out, err
}

// refusedLB returns err, applyLB's refusal of a load balancer to create
// that lbcheck.LoadBalancer let through, as CreateLoadBalancer reports it: every
// cause is in the input (a requested IP outside its pool or taken, a
// backend pool that does not exist, a backend that is not a live
// instance), so it is an invalidLB, but for a pool without a free address
// and errInvalidBackend, which keep their own sentinels.
func refusedLB(err error) error {
	if errors.Is(err, errPoolExhausted) || errors.Is(err, errInvalidBackend) {
		return err
	}
	return invalidLB{err}
}

// invalidLB is an error of the cloud (its message as it is) that marks
// input CreateLoadBalancer refuses: errors.Is(err, errInvalidLoadBalancer)
// is true.
type invalidLB struct{ error }

func (e invalidLB) Is(target error) bool { return target == errInvalidLoadBalancer }
func (e invalidLB) Unwrap() error        { return e.error }

// RemoveListenerContext is RemoveListener, waiting for a state file's lock
// at most until ctx ends (see CreateLoadBalancerContext).
func (c *Cloud) RemoveListenerContext(ctx context.Context, id string, protocol v1.Protocol, port int32) (LoadBalancer, error) {
	if errs := lbcheck.ListenerKey(field.NewPath("listener"), protocol, port); len(errs) > 0 {
		return LoadBalancer{}, fmt.Errorf("%w: %w", errInvalidListener, errs.ToAggregate())
	}
	return c.store.editLB(ctx, id, func(lb *loadbalancer.LoadBalancer) ([]loadbalancer.Action, error) {
		var out []loadbalancer.Action
		for _, l := range lb.Spec.Listeners {
			k := l.ListenerKey
			if k.Protocol == protocol && k.Port == port && !slices.ContainsFunc(out, func(a loadbalancer.Action) bool { return a.Listener.ListenerKey == k }) {
				out = append(out, loadbalancer.Action{Kind: loadbalancer.ActionRemoveListener, LoadBalancerID: id, Listener: &loadbalancer.Listener{ListenerKey: k}})
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: load balancer %s listener %s/%d: expected one of its listeners: %s", errListenerNotFound, clip(id), protocol, port, listenerNames(lb.Spec.Listeners))
		}
		return out, nil
	})
}

// RemoveBackendContext is RemoveBackend, waiting for a state file's lock
// at most until ctx ends (see CreateLoadBalancerContext).
func (c *Cloud) RemoveBackendContext(ctx context.Context, id, key string) (LoadBalancer, error) {
	if key == "" {
		return LoadBalancer{}, fmt.Errorf("%w: key \"\": expected the key of a backend (its Node name, or its provider ID with loadBalancers.backends instanceID)", errInvalidBackend)
	}
	return c.store.editLB(ctx, id, func(lb *loadbalancer.LoadBalancer) ([]loadbalancer.Action, error) {
		k := lb.Spec.BackendKey
		if matched := withKey(k, lb.Spec.Backends, key); len(matched) > 0 {
			return []loadbalancer.Action{{Kind: loadbalancer.ActionRemoveBackends, LoadBalancerID: id, Backends: matched}}, nil
		}
		for _, l := range lb.Spec.Listeners { // hierarchical: the member of the first pool that has it, one pool only
			if l.Pool == nil {
				continue
			}
			if matched := withKey(k, l.Pool.Backends, key); len(matched) > 0 {
				return []loadbalancer.Action{{Kind: loadbalancer.ActionRemoveBackends, LoadBalancerID: id, Listener: &l, Backends: matched}}, nil
			}
		}
		where := fmt.Sprintf("load balancer %s backend %s (by %s)", clip(id), clip(key), lbcheck.KeyNames[k])
		if pool := lb.Spec.BackendPool; pool != "" {
			return nil, fmt.Errorf("%w: %s: expected one of its own backends (%s): it sends traffic to backend pool %s, whose members RemoveBackendPoolMember (DELETE /backendpools/{id}/backends/{key}) removes",
				errBackendNotFound, where, backendNames(k, lb.Spec.Backends), clip(pool))
		}
		return nil, fmt.Errorf("%w: %s: expected one of its backends: %s", errBackendNotFound, where, backendNames(k, lb.Spec.Backends))
	})
}

// RemoveBackendPoolMemberContext is RemoveBackendPoolMember, waiting for a
// state file's lock at most until ctx ends (see
// CreateLoadBalancerContext).
func (c *Cloud) RemoveBackendPoolMemberContext(ctx context.Context, poolID, key string) (out loadbalancer.Pool, err error) {
	err = c.store.writeCtx(ctx, func() (bool, error) {
		p := c.store.bpools[poolID]
		if p == nil {
			return false, fmt.Errorf("%w: %s: expected the ID of a shared backend pool (loadBalancers.backendPools shared)", errBackendPoolNotFound, clip(poolID))
		}
		k := p.Spec.BackendKey
		matched := withKey(k, p.Spec.Backends, key)
		if len(matched) == 0 {
			return false, fmt.Errorf("%w: backend pool %s member %s (by %s): expected one of its members: %s", errBackendNotFound, clip(poolID), clip(key), lbcheck.KeyNames[k], backendNames(k, p.Spec.Backends))
		}
		next, err := c.store.applyPool(loadbalancer.PoolAction{Kind: loadbalancer.PoolActionRemoveBackends, PoolID: poolID, Reason: "removed through the control surface", Backends: matched})
		if err != nil {
			return false, err
		}
		out = *next.Clone()
		return true, nil
	})
	return out, err
}

// editLB changes load balancer id with the actions plan returns for it
// (plan reads the stored load balancer, with mu held, and must not change
// it), all or nothing, and returns the load balancer as Snapshot reports
// it. It returns an error wrapping loadbalancer.ErrNotFound for an unknown
// id, plan's error, or one wrapping ErrStateFile; it waits for a state
// file's lock at most until ctx ends.
func (s *store) editLB(ctx context.Context, id string, plan func(*loadbalancer.LoadBalancer) ([]loadbalancer.Action, error)) (out LoadBalancer, err error) {
	err = s.writeCtx(ctx, func() (bool, error) {
		before := s.lbs[id]
		if before == nil {
			return false, fmt.Errorf("fake: %w: %s: expected the ID of a load balancer of the cloud", loadbalancer.ErrNotFound, clip(id))
		}
		actions, err := plan(before.lb)
		if err != nil {
			return false, err
		}
		r := before
		for _, a := range actions {
			if r, err = s.applyLB(a); err != nil {
				// Only the listeners or backends changed: put the record
				// back as it was (its VIPs are the same).
				s.unindexLB(s.lbs[id].lb)
				s.lbs[id] = before
				s.indexLB(before.lb)
				return false, err
			}
		}
		out = viewLoadBalancer(r, s.now())
		return true, nil
	})
	return out, err
}

// withKey returns the backends of bs whose key under k is key.
func withKey(k loadbalancer.BackendKey, bs []loadbalancer.Backend, key string) []loadbalancer.Backend {
	var out []loadbalancer.Backend
	for _, b := range bs {
		if lbcheck.BackendID(k, b) == key {
			out = append(out, b)
		}
	}
	return out
}

// maxListed bounds the listeners or backends an error lists.
const maxListed = 10

// listed joins the first maxListed of names, saying how many more there
// are, or says there are none.
func listed(names []string) string {
	switch n := len(names); {
	case n == 0:
		return "none"
	case n > maxListed:
		return strings.Join(names[:maxListed], ", ") + fmt.Sprintf(" and %d more", n-maxListed)
	}
	return strings.Join(names, ", ")
}

// listenerNames lists ls as "IPv4/TCP/80, IPv6/TCP/80", for messages.
func listenerNames(ls []loadbalancer.Listener) string {
	names := make([]string, 0, len(ls))
	for _, l := range ls {
		names = append(names, lbcheck.ListenerText(l.ListenerKey))
	}
	return listed(names)
}

// backendNames lists the keys of bs under k, quoted, for messages.
func backendNames(k loadbalancer.BackendKey, bs []loadbalancer.Backend) string {
	names := make([]string, 0, len(bs))
	for _, b := range bs {
		names = append(names, clip(lbcheck.BackendID(k, b)))
	}
	return listed(names)
}
