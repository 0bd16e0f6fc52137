package routes

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

// Table defaults, used for the zero values of Config's fields.
const (
	// DefaultBatchWindow is how long the first caller of an idle
	// whole-table Table waits for other calls to join its batch.
	DefaultBatchWindow = 2 * time.Millisecond
	// DefaultMaxBatch is the most calls one batch applies: the route
	// controller's maxConcurrentRouteOperations.
	DefaultMaxBatch = 200
	// DefaultConflictRetries is how often a batch rereads and rewrites the
	// table after a WriteTable conflict.
	DefaultConflictRetries = 3
)

// Config configures a Table. Its zero value is valid: the default name
// format, TargetNodeAddresses not compared, IPv6 allowed, Blackhole only as
// the driver reports it, and the batching defaults above.
type Config struct {
	// Names is the route name format (see Namer).
	Names NameFormat
	// EnableNodeAddresses sets Route.EnableNodeAddresses on every listed
	// route, so that the route controller compares TargetNodeAddresses with
	// the node's addresses and replaces the route when they change. The
	// Table always stores and lists the addresses CreateRoute got.
	EnableNodeAddresses bool
	// IPv4Only declares that the cloud has no IPv6 routes: CreateRoute then
	// returns an error wrapping ErrIPv6Unsupported for an IPv6 CIDR before
	// any driver call.
	IPv4Only bool
	// Instances, when set, is asked once per ListRoutes which targets no
	// longer have an instance; their routes are listed as Blackhole.
	Instances InstanceChecker
	// BatchWindow (whole-table only) is how long the first caller of an idle
	// Table waits for concurrent calls to join its batch, unless MaxBatch
	// calls are already queued. 0 means DefaultBatchWindow; negative means
	// no wait (calls that arrive while a batch is being written still form
	// the next batch).
	BatchWindow time.Duration
	// MaxBatch (whole-table only) is the most calls one batch applies.
	// 0 means DefaultMaxBatch.
	MaxBatch int
	// ConflictRetries (whole-table only) is how often a batch whose
	// WriteTable failed with ErrConflict is reread, reapplied and rewritten.
	// 0 means DefaultConflictRetries; negative means none.
	ConflictRetries int
}

// Stats counts a whole-table Table's work since it was made. For a
// RouteDriver Table every count stays 0.
type Stats struct {
	// Batches is the number of batches applied (each reads the table once,
	// or more after conflicts).
	Batches uint64
	// Writes is the number of WriteTable calls, failed ones included. A
	// batch whose calls change nothing writes nothing.
	Writes uint64
	// Conflicts is the number of WriteTable calls that failed with
	// ErrConflict.
	Conflicts uint64
	// Calls is the number of CreateRoute and DeleteRoute calls that joined
	// a batch.
	Calls uint64
}

// Table implements cloudprovider.Routes over a RouteDriver (NewTable) or a
// TableDriver (NewWholeTable).
//
// A Table is safe for concurrent use; the route controller makes up to 200
// CreateRoute and DeleteRoute calls at once. With a TableDriver those calls
// are coalesced: the first caller of an idle Table becomes the batch leader,
// waits Config.BatchWindow for other calls to join, reads the table once,
// applies every call (deletes first, then creates), writes the table once
// and hands each caller its own result; calls arriving meanwhile form the
// next batch, led by the first of them. The Table starts no goroutines of its
// own: batches run on their leaders' goroutines.
//
// Create and delete are idempotent. Every error a Table returns wraps the
// driver's error or one of this package's sentinels with %w.
type Table struct {
	cfg    Config
	namer  *Namer
	routes RouteDriver
	table  TableDriver

	driverMu sync.Mutex // serializes every TableDriver call
	batch    batcher
	stats    struct{ batches, writes, conflicts, calls atomic.Uint64 }
}

var _ cloudprovider.Routes = (*Table)(nil)

// NewTable returns a Table over a per-route driver. It fails, naming the
// field, when d is nil or c.Names is invalid.
func NewTable(d RouteDriver, c Config) (*Table, error) {
	if d == nil {
		return nil, errors.New("routes: NewTable: RouteDriver is nil: want a driver")
	}
	t, err := newTable(c)
	if err != nil {
		return nil, err
	}
	t.routes = d
	return t, nil
}

// NewWholeTable returns a Table over a whole-table driver, coalescing
// concurrent CreateRoute and DeleteRoute calls into one table write per
// batch. It fails, naming the field, when d is nil or c is invalid.
func NewWholeTable(d TableDriver, c Config) (*Table, error) {
	if d == nil {
		return nil, errors.New("routes: NewWholeTable: TableDriver is nil: want a driver")
	}
	t, err := newTable(c)
	if err != nil {
		return nil, err
	}
	t.table = d
	return t, nil
}

func newTable(c Config) (*Table, error) {
	if c.MaxBatch < 0 {
		return nil, fmt.Errorf("routes: Config.MaxBatch %d: want a positive number (or 0 for %d)", c.MaxBatch, DefaultMaxBatch)
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.BatchWindow == 0 {
		c.BatchWindow = DefaultBatchWindow
	}
	switch {
	case c.ConflictRetries == 0:
		c.ConflictRetries = DefaultConflictRetries
	case c.ConflictRetries < 0:
		c.ConflictRetries = 0
	}
	n, err := NewNamer(c.Names)
	if err != nil {
		return nil, err
	}
	return &Table{cfg: c, namer: n}, nil
}

// Namer returns the Namer the Table names routes with.
func (t *Table) Namer() *Namer { return t.namer }

// Stats returns the Table's counters. It is safe to call at any time.
func (t *Table) Stats() Stats {
	return Stats{
		Batches:   t.stats.batches.Load(),
		Writes:    t.stats.writes.Load(),
		Conflicts: t.stats.conflicts.Load(),
		Calls:     t.stats.calls.Load(),
	}
}

// ListRoutes implements cloudprovider.Routes. It returns the routes whose
// Entry.Cluster is clusterName, with DestinationCIDR, TargetNode and
// TargetNodeAddresses exactly as the driver stored them, and Blackhole set
// when the driver says so, when the route has no TargetNode, or when
// Config.Instances reports its target gone (one call for the whole list).
// Errors from the driver or the InstanceChecker are wrapped.
func (t *Table) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	if clusterName == "" {
		return nil, fmt.Errorf("routes: ListRoutes: clusterName is empty: want the cluster's name: %w", ErrInvalidRoute)
	}
	var entries []Entry
	var err error
	if t.routes != nil {
		entries, err = t.routes.ListRoutes(ctx, clusterName)
	} else {
		t.driverMu.Lock()
		entries, _, err = t.table.ReadTable(ctx)
		t.driverMu.Unlock()
	}
	if err != nil {
		return nil, fmt.Errorf("routes: list routes of cluster %q: %w", clusterName, err)
	}
	owned := make([]Entry, 0, len(entries))
	for _, e := range entries {
		if e.Cluster == clusterName {
			owned = append(owned, e)
		}
	}
	gone, err := t.goneTargets(ctx, owned)
	if err != nil {
		return nil, err
	}
	out := make([]*cloudprovider.Route, 0, len(owned))
	for _, e := range owned {
		out = append(out, &cloudprovider.Route{
			Name:                e.Name,
			TargetNode:          e.TargetNode,
			EnableNodeAddresses: t.cfg.EnableNodeAddresses,
			TargetNodeAddresses: slices.Clone(e.TargetNodeAddresses),
			DestinationCIDR:     e.DestinationCIDR,
			Blackhole:           e.Blackhole || e.TargetNode == "" || gone[e.TargetNode],
		})
	}
	return out, nil
}

// goneTargets asks Config.Instances, once, about every distinct live target.
func (t *Table) goneTargets(ctx context.Context, entries []Entry) (map[types.NodeName]bool, error) {
	if t.cfg.Instances == nil {
		return nil, nil
	}
	seen := make(map[types.NodeName]bool)
	var targets []types.NodeName
	for _, e := range entries {
		if _, dup := seen[e.TargetNode]; dup || e.Blackhole || e.TargetNode == "" {
			continue
		}
		seen[e.TargetNode] = false
		targets = append(targets, e.TargetNode)
	}
	if len(targets) == 0 {
		return nil, nil
	}
	gone, err := t.cfg.Instances.GoneTargets(ctx, targets)
	if err != nil {
		return nil, fmt.Errorf("routes: list routes: check %d route targets for instances: %w", len(targets), err)
	}
	for _, n := range gone {
		if _, asked := seen[n]; asked {
			seen[n] = true
		}
	}
	return seen, nil
}

// CreateRoute implements cloudprovider.Routes. It ignores route.Name and
// stores a route named Namer().Name(nameHint, route.DestinationCIDR) with the
// caller's DestinationCIDR string, TargetNode and a copy of
// TargetNodeAddresses; route is not modified.
//
// It is idempotent: creating a route that exists (same name) succeeds, and
// with a TableDriver rewrites it only if its target or addresses differ.
// Errors: ErrInvalidRoute (nil route, empty clusterName, nameHint or
// TargetNode, unparsable DestinationCIDR) and ErrIPv6Unsupported before any
// driver call; with a TableDriver, ErrCIDRInUse when another route holds the
// destination; otherwise the driver's error, wrapped. If ctx ends first it
// returns ctx.Err() (see DeleteRoute for what that means for the change).
func (t *Table) CreateRoute(ctx context.Context, clusterName string, nameHint string, route *cloudprovider.Route) error {
	e, p, err := t.newEntry(clusterName, nameHint, route)
	if err != nil {
		return err
	}
	if t.routes != nil {
		err := t.routes.CreateRoute(ctx, e)
		if err != nil && !errors.Is(err, ErrAlreadyExists) {
			return fmt.Errorf("routes: create route %q %s -> node %q: %w", e.Name, e.DestinationCIDR, e.TargetNode, err)
		}
		return nil
	}
	return t.batch.do(ctx, t, &op{create: true, cluster: clusterName, entry: e, prefix: p})
}

func (t *Table) newEntry(clusterName, nameHint string, route *cloudprovider.Route) (Entry, netip.Prefix, error) {
	switch {
	case route == nil:
		return Entry{}, netip.Prefix{}, fmt.Errorf("routes: CreateRoute: route is nil: want a route: %w", ErrInvalidRoute)
	case clusterName == "":
		return Entry{}, netip.Prefix{}, fmt.Errorf("routes: CreateRoute %s: clusterName is empty: want the cluster's name: %w", route.DestinationCIDR, ErrInvalidRoute)
	case nameHint == "":
		return Entry{}, netip.Prefix{}, fmt.Errorf("routes: CreateRoute %s: nameHint is empty: want the node UID: %w", route.DestinationCIDR, ErrInvalidRoute)
	case route.TargetNode == "":
		return Entry{}, netip.Prefix{}, fmt.Errorf("routes: CreateRoute %s: route.TargetNode is empty: want a node name: %w", route.DestinationCIDR, ErrInvalidRoute)
	}
	p, err := netip.ParsePrefix(route.DestinationCIDR)
	if err != nil {
		return Entry{}, netip.Prefix{}, fmt.Errorf("routes: CreateRoute: route.DestinationCIDR %q: want a CIDR such as 10.244.1.0/24 or fd00:10:244:1::/64: %w", route.DestinationCIDR, ErrInvalidRoute)
	}
	if t.cfg.IPv4Only && !p.Addr().Is4() {
		return Entry{}, netip.Prefix{}, fmt.Errorf("routes: CreateRoute: route.DestinationCIDR %q for node %q is IPv6: want IPv4, the cloud is configured IPv4Only: %w", route.DestinationCIDR, route.TargetNode, ErrIPv6Unsupported)
	}
	return Entry{
		Name:                t.namer.Name(nameHint, route.DestinationCIDR),
		Cluster:             clusterName,
		DestinationCIDR:     route.DestinationCIDR,
		TargetNode:          route.TargetNode,
		TargetNodeAddresses: slices.Clone(route.TargetNodeAddresses),
	}, p.Masked(), nil
}

// DeleteRoute implements cloudprovider.Routes. route is a route as
// ListRoutes returned it; the owned routes of clusterName with its Name (when
// not empty), DestinationCIDR and TargetNode are deleted. Deleting a route
// that does not exist succeeds. Errors: ErrInvalidRoute for a nil route or an
// empty clusterName; otherwise the driver's error, wrapped.
//
// With a TableDriver, if ctx ends before the call's batch completes, it
// returns ctx.Err(): the change is dropped if no batch has taken it yet and
// may still be applied if one has; the other calls of the batch are not
// affected (the batch's driver calls are cancelled only when every caller in
// it has given up). A caller leading a batch returns after the batch.
func (t *Table) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	switch {
	case route == nil:
		return fmt.Errorf("routes: DeleteRoute: route is nil: want a route as listed: %w", ErrInvalidRoute)
	case clusterName == "":
		return fmt.Errorf("routes: DeleteRoute %q: clusterName is empty: want the cluster's name: %w", route.Name, ErrInvalidRoute)
	}
	e := Entry{
		Name:                route.Name,
		Cluster:             clusterName,
		DestinationCIDR:     route.DestinationCIDR,
		TargetNode:          route.TargetNode,
		TargetNodeAddresses: slices.Clone(route.TargetNodeAddresses),
	}
	if t.routes != nil {
		return t.deleteOne(ctx, e)
	}
	var p netip.Prefix
	if q, err := netip.ParsePrefix(route.DestinationCIDR); err == nil {
		p = q.Masked()
	}
	return t.batch.do(ctx, t, &op{cluster: clusterName, entry: e, prefix: p})
}

// deleteOne deletes through a RouteDriver; a route without a name is found
// by listing.
func (t *Table) deleteOne(ctx context.Context, e Entry) error {
	victims := []Entry{e}
	if e.Name == "" {
		all, err := t.routes.ListRoutes(ctx, e.Cluster)
		if err != nil {
			return fmt.Errorf("routes: delete route %s -> node %q: list routes to find it: %w", e.DestinationCIDR, e.TargetNode, err)
		}
		victims = victims[:0]
		for _, a := range all {
			if matchesListed(a, e) {
				victims = append(victims, a)
			}
		}
	}
	for _, v := range victims {
		if err := t.routes.DeleteRoute(ctx, v); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("routes: delete route %q %s -> node %q: %w", v.Name, v.DestinationCIDR, v.TargetNode, err)
		}
	}
	return nil
}

// matchesListed reports whether the stored entry a is the route r as listed:
// same cluster, DestinationCIDR and TargetNode, and same Name unless r has
// none.
func matchesListed(a, r Entry) bool {
	return a.Cluster == r.Cluster && a.DestinationCIDR == r.DestinationCIDR &&
		a.TargetNode == r.TargetNode && (r.Name == "" || a.Name == r.Name)
}
