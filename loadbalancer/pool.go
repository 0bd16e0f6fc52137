package loadbalancer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TagPool holds the key of a shared backend pool: what decides its members
// (see the package doc, "Shared backend pools"). A pool ccmkit creates
// carries TagCluster and TagPool, and no TagServiceUID: it belongs to the
// cluster, not to one Service.
const TagPool = "ccmkit.io/backend-pool"

// ErrPoolInUse is what PoolDriver.DeletePool returns, wrapped, when a load
// balancer still references the pool: the cloud refused, and nothing was
// deleted. The Reconciler reads it as "someone else still uses it", never as
// a failure.
var ErrPoolInUse = errors.New("backend pool in use")

// Pool is the provider-neutral model of one shared backend pool: a group of
// backends that several load balancers reference (Spec.BackendPool), such as
// a GCE instance group, an Azure backend pool or an hcloud label-selector
// target. Like LoadBalancer it is a plain value, used for the desired pool
// (ID empty) and for what a PoolDriver reports, and marshals to JSON with
// lowerCamel field names. It is not safe for concurrent mutation, and the
// functions of this package never mutate one they were given.
type Pool struct {
	// ID is the cloud-assigned identifier; empty in a desired pool.
	ID string `json:"id,omitempty"`
	// Name is the cloud name: "<prefix>-pool-<key>-<hash>" under the
	// Reconciler's NamerOptions. It is for people; identity is in Tags.
	Name string `json:"name,omitempty"`
	// Tags are the pool's tags. A desired pool holds exactly TagCluster and
	// TagPool; a PoolDriver reports every tag it knows.
	Tags map[string]string `json:"tags,omitempty"`
	// Spec is what ccmkit manages on the pool.
	Spec PoolSpec `json:"spec"`
}

// PoolSpec is the part of a pool that ccmkit manages.
type PoolSpec struct {
	// IPFamilies are the families of its members' addresses, IPv4 first:
	// the set of families of the Services it serves (a Service's order of
	// families does not change its backends).
	IPFamilies []v1.IPFamily `json:"ipFamilies,omitempty"`
	// Backends are the members, as in Spec.Backends: sorted by BackendKey,
	// each with at least the fields of its key.
	Backends []Backend `json:"backends,omitempty"`
	// BackendKey is what the cloud keeps of each member (see BackendKey);
	// a PoolDriver need not report it.
	BackendKey BackendKey `json:"backendKey,omitempty"`
}

// Clone returns a deep copy of p (nil for nil).
func (p *Pool) Clone() *Pool {
	if p == nil {
		return nil
	}
	c := *p
	c.Tags = maps.Clone(p.Tags)
	c.Spec.IPFamilies = slices.Clone(p.Spec.IPFamilies)
	c.Spec.Backends = slices.Clone(p.Spec.Backends)
	return &c
}

// PoolQuery selects pools in PoolDriver.FindPools. Exactly one field is set.
type PoolQuery struct {
	// ID selects the pool with this cloud ID (at most one).
	ID string
	// Tags selects pools carrying all of these tags with these values: the
	// Reconciler passes TagCluster and TagPool to find one pool, or
	// TagCluster alone to find every pool of its cluster.
	Tags map[string]string
}

// PoolActionKind is the type of a PoolAction. Its value is readable in logs.
type PoolActionKind string

// The pool action kinds. Every kind is one write to the cloud.
const (
	// PoolActionCreate creates the pool described by PoolAction.Create
	// (Name, Tags, Spec with its members).
	PoolActionCreate PoolActionKind = "CreatePool"
	// PoolActionAddBackends adds PoolAction.Backends to the pool, replacing
	// a member with the same key, as ActionAddBackends does.
	PoolActionAddBackends PoolActionKind = "AddPoolBackends"
	// PoolActionRemoveBackends removes PoolAction.Backends, by key, as
	// ActionRemoveBackends does.
	PoolActionRemoveBackends PoolActionKind = "RemovePoolBackends"
)

// PoolAction is one write to a pool. Kind says which payload field is set.
// A Driver must not modify it.
type PoolAction struct {
	Kind PoolActionKind
	// PoolID is the target (empty for PoolActionCreate).
	PoolID string
	// Reason says in words why the action is needed, for logs.
	Reason string
	// Create is the desired pool (PoolActionCreate).
	Create *Pool
	// Backends are the members to add or remove, sorted by the desired
	// BackendKey (PoolActionAddBackends, PoolActionRemoveBackends).
	Backends []Backend
}

// String returns the kind, target and reason, for logs.
func (a PoolAction) String() string {
	return fmt.Sprintf("%s %s: %s", a.Kind, a.PoolID, a.Reason)
}

// PoolDriver is a Driver whose cloud lets several load balancers reference
// one backend pool; declare it with Capabilities.SharedBackendPools (see the
// package doc, "Shared backend pools"). Implementations must be safe for
// concurrent use. Throttling and errors follow the Driver conventions: an
// error wrapping an *api.RetryError says "retry after D"; the Reconciler
// names the call and the pool in its errors.
type PoolDriver interface {
	Driver
	// FindPools returns the pools matching q, in any order, or an empty
	// slice (not an error) when none match. Exactly one field of q is set.
	// Each result has ID, Name, Tags and Spec.Backends (each member with at
	// least the fields of Capabilities.BackendKey).
	FindPools(ctx context.Context, q PoolQuery) ([]*Pool, error)
	// ApplyPool performs one PoolAction and returns the pool as it is
	// afterwards. For PoolActionCreate it creates the pool with a.Create's
	// Name, Tags and Spec and returns it with its new ID; every other kind
	// targets a.PoolID and changes only the members it names (see ApplyPool
	// for the reference semantics).
	ApplyPool(ctx context.Context, a PoolAction) (*Pool, error)
	// DeletePool deletes p (as returned by FindPools). It returns nil when
	// the pool is gone, including when it already was, and an error
	// wrapping ErrPoolInUse, deleting nothing, while any load balancer
	// references it (Spec.BackendPool): the cloud, not the caller, decides
	// whether a pool is in use, so that a pool another replica or cluster
	// member just referenced is never deleted under it.
	DeletePool(ctx context.Context, p *Pool) error
}

// PoolListDriver is a ListDriver and PoolDriver that can also list, in one
// call, every pool its FindPools could return: a Cache over one answers pool
// look-ups from that list too. Implementations must be safe for concurrent
// use.
type PoolListDriver interface {
	ListDriver
	PoolDriver
	// ListPools returns every pool FindPools could return (it may return
	// more), each as FindPools returns it, or an error, never a partial
	// list. The caller keeps the slice and the pools in it.
	ListPools(ctx context.Context) ([]*Pool, error)
}

// poolKey returns the TagPool value of the pool of Services whose backends
// are every eligible Node, kept by key, with addresses of families: a pure
// function of what decides the members, so that every replica and every
// restart finds the same pool. Families count as a set. The value is made
// of [a-z0-9-] so that it is a valid tag value on every cloud.
func poolKey(key BackendKey, families []v1.IPFamily) string {
	parts := []string{"all"} // the node predicate: every Node the service controller passes
	for _, f := range sortedFamilies(families) {
		parts = append(parts, strings.ToLower(string(f)))
	}
	parts = append(parts, strings.ToLower(cmp.Or(string(key), "NodeName")))
	return strings.Join(parts, "-")
}

// sortedFamilies returns a copy of families in canonical order, IPv4 first.
func sortedFamilies(families []v1.IPFamily) []v1.IPFamily {
	out := slices.Clone(families)
	slices.SortFunc(out, func(a, b v1.IPFamily) int { return familyRank(a) - familyRank(b) })
	return out
}

// poolTags returns the tags of the pool of key in cluster (a new map); its
// Query selector is the same map.
func poolTags(cluster, key string) map[string]string {
	return map[string]string{TagCluster: cluster, TagPool: key}
}

// ownsPool reports whether tags mark a pool as cluster's: TagCluster equal
// to cluster and a TagPool.
func ownsPool(cluster string, tags map[string]string) bool {
	return cluster != "" && tags[TagCluster] == cluster && tags[TagPool] != ""
}

// desiredPool returns the pool of the backends (built for families, kept
// by key) in cluster, named by namer.
func desiredPool(cluster string, namer *Namer, key BackendKey, families []v1.IPFamily, backends []Backend) *Pool {
	tag := poolKey(key, families)
	return &Pool{
		Name: namer.NameFor(cluster, "pool", tag, types.UID("pool/"+tag)),
		Tags: poolTags(cluster, tag),
		Spec: PoolSpec{
			IPFamilies: sortedFamilies(families),
			Backends:   slices.Clone(backends),
			BackendKey: key,
		},
	}
}

// planPool returns the actions that bring actual (nil: none yet) to
// desired: PoolActionCreate alone, or the member additions then removals,
// matched by desired.Spec.BackendKey exactly as Plan matches a load
// balancer's backends (one diff, planner.backends). The result is empty
// (nil) when the members are converged. desired and actual are only read.
// It returns an error for a nil desired, one without TagCluster and
// TagPool, or an actual that is another cluster's or another key's.
func planPool(desired, actual *Pool) ([]PoolAction, error) {
	if desired == nil || !ownsPool(desired.Tags[TagCluster], desired.Tags) {
		return nil, errors.New("loadbalancer: planning a backend pool: desired pool is nil or untagged: expected the tags ccmkit.io/cluster and ccmkit.io/backend-pool")
	}
	if actual == nil {
		return []PoolAction{{Kind: PoolActionCreate, Create: desired.Clone(),
			Reason: fmt.Sprintf("no backend pool %s exists", desired.Tags[TagPool])}}, nil
	}
	if actual.Tags[TagCluster] != desired.Tags[TagCluster] || actual.Tags[TagPool] != desired.Tags[TagPool] {
		return nil, fmt.Errorf("backend pool %q (id %q) has tags %v: expected %s=%q and %s=%q", actual.Name, actual.ID, actual.Tags,
			TagCluster, desired.Tags[TagCluster], TagPool, desired.Tags[TagPool])
	}
	key := desired.Spec.BackendKey
	if err := key.check("loadbalancer: planning a backend pool: desired Spec.BackendKey"); err != nil {
		return nil, err
	}
	p := planner{id: actual.ID}
	p.backends(nil, sortedBackends(desired.Spec.Backends, key), sortedBackends(actual.Spec.Backends, key), key)
	var out []PoolAction
	for _, a := range p.actions {
		kind := PoolActionAddBackends
		if a.Kind == ActionRemoveBackends {
			kind = PoolActionRemoveBackends
		}
		out = append(out, PoolAction{Kind: kind, PoolID: actual.ID, Reason: a.Reason, Backends: a.Backends})
	}
	return out, nil
}

// sortedBackends returns bs sorted by key: bs itself when it already is
// (stably, so that copies of one key stay together), else a sorted copy.
func sortedBackends(bs []Backend, key BackendKey) []Backend {
	compare := key.compareFunc()
	if slices.IsSortedFunc(bs, compare) {
		return bs
	}
	out := slices.Clone(bs)
	slices.SortStableFunc(out, compare)
	return out
}

// ApplyPool returns a copy of p with a applied, the reference semantics of
// each PoolActionKind; an in-memory PoolDriver can store pools and call it.
// For PoolActionCreate it returns a copy of a.Create (p is ignored and may
// be nil; the caller assigns the ID). Members are added and removed by
// p.Spec.BackendKey exactly as Apply adds and removes a load balancer's
// backends. p and a are only read. It returns an error (not wrapped) for a
// nil p, a wrong target ID, a nil Create or an unknown kind.
func ApplyPool(p *Pool, a PoolAction) (*Pool, error) {
	switch a.Kind {
	case PoolActionCreate:
		if a.Create == nil {
			return nil, errors.New("the action's Create is nil: expected the pool to create")
		}
		out := a.Create.Clone()
		out.Spec.canonicalize()
		return out, nil
	case PoolActionAddBackends, PoolActionRemoveBackends:
	default:
		return nil, fmt.Errorf("unknown pool action kind %q", a.Kind)
	}
	if p == nil {
		return nil, errors.New("the backend pool does not exist")
	}
	if a.PoolID != p.ID {
		return nil, fmt.Errorf("the action targets backend pool %q: expected %q, the one given", a.PoolID, p.ID)
	}
	out := p.Clone()
	s := Spec{BackendKey: out.Spec.BackendKey, Backends: out.Spec.Backends}
	kind := ActionAddBackends
	if a.Kind == PoolActionRemoveBackends {
		kind = ActionRemoveBackends
	}
	applyBackends(&s, Action{Kind: kind, Backends: a.Backends})
	out.Spec.Backends = s.Backends
	out.Spec.canonicalize()
	return out, nil
}

// canonicalize puts s in canonical form in place: families IPv4 first,
// members sorted by s.BackendKey.
func (s *PoolSpec) canonicalize() {
	slices.SortStableFunc(s.IPFamilies, func(a, b v1.IPFamily) int { return familyRank(a) - familyRank(b) })
	slices.SortStableFunc(s.Backends, s.BackendKey.compareFunc())
}
