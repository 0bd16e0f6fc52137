package routes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/clock"

	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/clip"
	"github.com/ccmkit/ccmkit/internal/staleness"
)

// Table defaults, used for the zero values of Options' fields.
const (
	defaultBatchWindow     = 2 * time.Millisecond
	defaultMaxBatch        = 200 // the route controller's maxConcurrentRouteOperations
	defaultConflictRetries = 3
	// One minute is longer than the route controller's default reconcile
	// period (--route-reconciliation-period, 10s) and than the Retry-After
	// of common cloud APIs, and short enough that a cloud that keeps
	// throttling is reported within a minute.
	defaultMaxThrottleWait = time.Minute
)

// Options configures a Table. Every field is optional; the zero value
// means: the cluster identity from each call's clusterName, the default
// name format, TargetNodeAddresses not compared, IPv6 allowed, Blackhole
// only as the driver reports it, and the batching and throttling defaults
// stated on each field.
type Options struct {
	// ClusterID, if set, is the cluster identity that owns the Table's
	// routes, used instead of the clusterName argument of every call (the
	// CCM's --cluster-name, "kubernetes" in most clusters): it is stored as
	// Entry.Cluster of the routes the Table creates, passed to
	// RouteDriver.ListRoutes, and only routes whose Entry.Cluster equals it
	// are listed, replaced or deleted. It has the semantics of the
	// loadbalancer package's ClusterID: set both to the same value so that
	// two clusters on one network, both called "kubernetes", never touch
	// each other's routes or load balancers. Changing it orphans the routes
	// made under the old identity. When set, it must not begin or end with
	// white space (NewTable and NewWholeTable reject it, naming the value);
	// an empty ClusterID with an empty clusterName is an ErrInvalidRoute
	// error at call time.
	ClusterID string
	// Naming is the route name format (see Namer), as
	// loadbalancer.Options.Naming is the load-balancer name format.
	Naming NamerOptions
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
	// calls are already queued. 0 means 2ms; negative means no wait (calls
	// that arrive while a batch is being written still form the next
	// batch).
	BatchWindow time.Duration
	// MaxBatch (whole-table only) is the most calls one batch applies.
	// 0 means 200, the route controller's maxConcurrentRouteOperations;
	// negative is an error.
	MaxBatch int
	// ConflictRetries (whole-table only) is how often a batch whose
	// WriteTable failed with ErrConflict is reread, reapplied and rewritten.
	// 0 means 3; negative means none.
	ConflictRetries int
	// MaxThrottleWait bounds the total time the Table waits on behalf of
	// one ListRoutes, CreateRoute or DeleteRoute call for throttled driver
	// calls (errors wrapping an *api.RetryError, see RouteDriver): it is
	// the sum of the RetryAfter delays the Table honours for that call.
	// When the next delay would take the sum past MaxThrottleWait, or past
	// the call's context deadline, the call fails at once with an error
	// wrapping the driver's (errors.As still finds the RetryError). A call
	// that joins a whole-table batch while the Table is backing off also
	// waits for the rest of that back-off before its own budget starts.
	// 0 means one minute; negative means none: a throttled driver call
	// fails its callers at once.
	MaxThrottleWait time.Duration
	// ListTTL is how long ListRoutes may answer a cluster from its last
	// answer instead of reading the cloud again (and asking Instances
	// again). The route controller lists every
	// --route-reconciliation-period, 10s by default, whatever has changed
	// (k8s.io/cloud-provider@v0.37.2 controllers/route/route_controller.go
	// Run): with a ListTTL of a minute, a converged cluster costs one table
	// read (and one instance check) a minute instead of six. Every driver
	// write of the Table (CreateRoute, DeleteRoute, a batch's WriteTable,
	// failed ones included) drops what it remembers, so the controller
	// sees its own changes at once; a change made outside the Table (a
	// route deleted by hand, another writer, an instance terminated, so
	// its route Blackhole) is seen up to ListTTL late. 0 means none: every
	// ListRoutes reads the cloud; negative is an error.
	ListTTL time.Duration
	// Clock is the Table's clock: ListTTL, BatchWindow and the waits for
	// throttled driver calls run on it. Nil means the real clock; tests
	// pass a k8s.io/utils/clock/testing.FakeClock and step it. It must be
	// safe for concurrent use.
	Clock clock.Clock
}

// Stats counts a Table's work since it was made. For a RouteDriver Table
// every count but Throttled stays 0.
type Stats struct {
	// Batches is the number of batches applied (each reads the table once,
	// or more after conflicts); a batch retried after a throttled driver
	// call counts again.
	Batches uint64
	// Writes is the number of WriteTable calls, failed ones included. A
	// batch whose calls change nothing writes nothing.
	Writes uint64
	// Conflicts is the number of WriteTable calls that failed with
	// ErrConflict.
	Conflicts uint64
	// Calls is the number of CreateRoute and DeleteRoute calls that joined
	// a batch; a call retried after a throttled driver call counts again.
	Calls uint64
	// Throttled is the number of driver calls that failed throttled (with
	// an error wrapping an *api.RetryError), of either driver kind.
	Throttled uint64
}

// Table implements cloudprovider.Routes over a RouteDriver (NewTable) or a
// TableDriver (NewWholeTable).
//
// A Table is safe for concurrent use; the route controller makes up to 200
// CreateRoute and DeleteRoute calls at once. With a TableDriver those calls
// are coalesced: the first caller of an idle Table becomes the batch leader,
// waits Options.BatchWindow for other calls to join, reads the table once,
// computes the change of every call with Diff (deletes first, then
// creates in call order), writes the table once and hands each caller its
// own result; calls arriving meanwhile form the next batch, led by the
// first of them. The Table starts no goroutines of its own: batches run on
// their leaders' goroutines.
//
// Create and delete are idempotent. Every error a Table returns wraps the
// driver's error or one of this package's sentinels with %w.
//
// Throttling: a driver call that fails with an error wrapping an
// *api.RetryError (k8s.io/cloud-provider/api) is retried after its
// RetryAfter, within Options.MaxThrottleWait per call and while the
// caller's context lives, so the route controller's calls do not fail
// because the cloud asked it to slow down. A throttled TableDriver call
// retries the whole batch (one ReadTable, at most one WriteTable, whatever
// the number of calls in it), on the goroutine of a caller still waiting
// for it; a RouteDriver call is retried on its own caller's goroutine.
// ListRoutes retries a throttled read the same way: the route controller
// abandons its whole reconcile on a ListRoutes error
// (RouteController.reconcileNodeRoutes in route_controller.go) and tries
// again only at its next period (--route-reconciliation-period, 10s) or,
// with the watch-based reconciliation, after its work queue's rate-limited
// back-off, so one read after the cloud's delay converges sooner.
type Table struct {
	opts   Options
	clock  clock.Clock // opts.Clock
	namer  *Namer
	routes RouteDriver
	table  TableDriver

	driverMu sync.Mutex // serializes every TableDriver call
	batch    batcher
	lists    listCache // ListRoutes answers kept for Options.ListTTL
	given    []any     // the driver and Options.Instances as given (MaxStaleness)
	stats    struct{ batches, writes, conflicts, calls, throttled atomic.Uint64 }
}

var _ cloudprovider.Routes = (*Table)(nil)

// NewTable returns a Table over a per-route driver. It fails, naming the
// field, its value and what was expected, when d is nil (a typed nil
// included) or opts is invalid (opts.Naming, opts.ClusterID,
// opts.MaxBatch); the error wraps nothing.
func NewTable(d RouteDriver, opts Options) (*Table, error) {
	const fn = "routes.NewTable"
	if err := check.Driver(fn, d, "routes.RouteDriver"); err != nil {
		return nil, err
	}
	t, err := newTable(fn, opts)
	if err != nil {
		return nil, err
	}
	t.routes = listedRoutes{meteredRoutes{d}, &t.lists}
	t.given = append(t.given, d)
	return t, nil
}

// NewWholeTable returns a Table over a whole-table driver, coalescing
// concurrent CreateRoute and DeleteRoute calls into one table write per
// batch. It fails like NewTable, when d is nil or opts is invalid.
func NewWholeTable(d TableDriver, opts Options) (*Table, error) {
	const fn = "routes.NewWholeTable"
	if err := check.Driver(fn, d, "routes.TableDriver"); err != nil {
		return nil, err
	}
	t, err := newTable(fn, opts)
	if err != nil {
		return nil, err
	}
	t.table = listedTable{meteredTable{d}, &t.lists}
	t.given = append(t.given, d)
	return t, nil
}

// newTable validates opts for the constructor fn and returns a Table
// without a driver.
func newTable(fn string, opts Options) (*Table, error) {
	if opts.ClusterID != "" && strings.TrimSpace(opts.ClusterID) != opts.ClusterID {
		return nil, fmt.Errorf("%s: Options.ClusterID %q: expected the cluster identity without leading or trailing white space (or empty to use each call's clusterName)", fn, opts.ClusterID)
	}
	if opts.ListTTL < 0 {
		return nil, fmt.Errorf("%s: Options.ListTTL %v: expected 0 (the default, none) or a positive duration", fn, opts.ListTTL)
	}
	if opts.MaxBatch < 0 {
		return nil, fmt.Errorf("%s: Options.MaxBatch %d: expected 0 (the default, %d) or a positive number", fn, opts.MaxBatch, defaultMaxBatch)
	}
	n, err := newNamer(fn, "Options.Naming", opts.Naming)
	if err != nil {
		return nil, err
	}
	t := &Table{opts: opts.withDefaults(), namer: n}
	t.clock = t.opts.Clock
	t.lists = listCache{ttl: t.opts.ListTTL, now: t.clock.Now}
	if t.opts.Instances != nil {
		t.given = []any{t.opts.Instances}
		t.opts.Instances = meteredChecker{t.opts.Instances}
	}
	return t, nil
}

// withDefaults returns o with its zero fields set to their defaults and its
// negative counts and durations (meaning none) set to 0; MaxBatch must not
// be negative.
func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = defaultMaxBatch
	}
	if o.BatchWindow == 0 {
		o.BatchWindow = defaultBatchWindow
	}
	switch {
	case o.ConflictRetries == 0:
		o.ConflictRetries = defaultConflictRetries
	case o.ConflictRetries < 0:
		o.ConflictRetries = 0
	}
	switch {
	case o.MaxThrottleWait == 0:
		o.MaxThrottleWait = defaultMaxThrottleWait
	case o.MaxThrottleWait < 0:
		o.MaxThrottleWait = 0
	}
	return o
}

// Invalidate drops the ListRoutes answers the Table remembers
// (Options.ListTTL), so the next ListRoutes reads the cloud: call it after
// changing routes, or terminating instances, outside the Table. Safe for
// concurrent use; a no-op without a ListTTL.
func (t *Table) Invalidate() { t.lists.drop() }

// MaxStaleness reports the longest time ListRoutes may lag a change made
// outside the Table (a route deleted by hand, an instance terminated):
// Options.ListTTL (0 by default: every ListRoutes reads the cloud), plus
// the longest MaxStaleness of the driver and of Options.Instances, for
// those that implement interface{ MaxStaleness() time.Duration }
// (provider.Staleness; 0 for the others): an answer remembered for
// ListTTL may hold what they answered that late. A ListRoutes that fails
// is an error, never a stale answer. The Table's own writes are seen at
// once. testing/conformance waits that much longer for such a change to
// show; a CCM does not need it. It is safe for concurrent use and calls
// no driver method but MaxStaleness.
func (t *Table) MaxStaleness() time.Duration {
	return t.opts.ListTTL + staleness.Max(t.given...)
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
		Throttled: t.stats.throttled.Load(),
	}
}

// cluster returns the cluster identity of a call given its clusterName:
// Options.ClusterID when set, else clusterName; "" when both are empty.
func (t *Table) cluster(clusterName string) string {
	return cmp.Or(t.opts.ClusterID, clusterName)
}

// cut returns a caller's value (a CIDR, a node or route name) cut to
// clip.MaxQuoted bytes with its length (clip.Quoted): the one bound of
// every value ccmkit quotes, so that a huge value makes no huge error.
func cut(s string) string { return clip.Quoted(s) }

// noCluster is the error of a call whose cluster identity is empty.
const noCluster = "clusterName is empty and Options.ClusterID is not set: expected the cluster's name"

// ListRoutes implements cloudprovider.Routes. It returns the routes whose
// Entry.Cluster is the Table's cluster identity (Options.ClusterID, or
// clusterName when that is not set), with DestinationCIDR, TargetNode and
// TargetNodeAddresses exactly as the driver stored them, and Blackhole set
// when the driver says so, when the route has no TargetNode, or when
// Options.Instances reports its target gone (one call for the whole list).
// A throttled driver read is retried within Options.MaxThrottleWait (see
// Table). Errors from the driver or the InstanceChecker are wrapped; if
// ctx ends while it waits out a throttle, the error wraps ctx.Err() and
// the throttled driver error. Values are quoted cut to a bounded length.
func (t *Table) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	cluster := t.cluster(clusterName)
	if cluster == "" {
		return nil, fmt.Errorf("routes: ListRoutes: %s: %w", noCluster, ErrInvalidRoute)
	}
	if routes, ok := t.lists.get(cluster); ok {
		return routes, nil
	}
	read := t.lists.begin()
	var (
		entries []Entry
		err     error
		waited  time.Duration
	)
	if t.routes != nil {
		err = t.retry(ctx, &waited, func() (err error) {
			entries, err = t.routes.ListRoutes(ctx, cluster)
			return err
		})
	} else {
		err = t.retry(ctx, &waited, func() (err error) {
			t.driverMu.Lock()
			defer t.driverMu.Unlock()
			entries, _, err = t.table.ReadTable(ctx)
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("routes: ListRoutes: cluster %q: %w", cut(cluster), err)
	}
	owned := make([]Entry, 0, len(entries))
	for _, e := range entries {
		if e.Cluster == cluster {
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
			EnableNodeAddresses: t.opts.EnableNodeAddresses,
			TargetNodeAddresses: slices.Clone(e.TargetNodeAddresses),
			DestinationCIDR:     e.DestinationCIDR,
			Blackhole:           e.Blackhole || e.TargetNode == "" || gone[e.TargetNode],
		})
	}
	t.lists.put(cluster, read, out)
	return out, nil
}

// goneTargets asks Options.Instances, once, about every distinct live target.
func (t *Table) goneTargets(ctx context.Context, entries []Entry) (map[types.NodeName]bool, error) {
	if t.opts.Instances == nil {
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
	gone, err := t.opts.Instances.GoneTargets(ctx, targets)
	if err != nil {
		return nil, fmt.Errorf("routes: ListRoutes: check %d route targets for instances: %w", len(targets), err)
	}
	for _, n := range gone {
		if _, asked := seen[n]; asked {
			seen[n] = true
		}
	}
	return seen, nil
}

// CreateRoute implements cloudprovider.Routes. It ignores route.Name and
// stores a route named Namer().Name(nameHint, route.DestinationCIDR), owned
// by the Table's cluster identity (Options.ClusterID, or clusterName), with
// the caller's DestinationCIDR string, TargetNode and a copy of
// TargetNodeAddresses; route is not modified. Names do not depend on the
// cluster identity: nameHint is the node UID, unique across clusters.
//
// It is idempotent: creating a route that exists (same name) succeeds, and
// with a TableDriver rewrites it only if its target or addresses differ.
// Throttled driver calls are retried within Options.MaxThrottleWait (see
// Table). Errors, each naming the field (route.DestinationCIDR,
// route.TargetNode, nameHint), the value quoted cut to a bounded length
// and what was expected: ErrInvalidRoute (nil route, empty cluster
// identity, nameHint or TargetNode, unparsable DestinationCIDR) and
// ErrIPv6Unsupported before any driver call; with a TableDriver,
// ErrCIDRInUse when another route has the same destination network (also
// naming that route, its cluster and node); otherwise the driver's error,
// wrapped. If ctx ends first the error wraps ctx.Err() and says what the
// call was waiting for (see DeleteRoute for that and for what it means
// for the change).
func (t *Table) CreateRoute(ctx context.Context, clusterName string, nameHint string, route *cloudprovider.Route) error {
	e, err := t.newEntry(clusterName, nameHint, route)
	if err != nil {
		return err
	}
	if t.routes != nil {
		var waited time.Duration
		err := t.retry(ctx, &waited, func() error { return t.routes.CreateRoute(ctx, e) })
		if err != nil && !errors.Is(err, ErrAlreadyExists) {
			return fmt.Errorf("routes: CreateRoute: route %q %q -> node %q: %w", e.Name, cut(e.DestinationCIDR), cut(string(e.TargetNode)), err)
		}
		return nil
	}
	return t.batch.do(ctx, t, &op{create: true, cluster: e.Cluster, hint: nameHint, entry: e})
}

func (t *Table) newEntry(clusterName, nameHint string, route *cloudprovider.Route) (Entry, error) {
	if route == nil {
		return Entry{}, fmt.Errorf("routes: CreateRoute: route is nil: expected a route: %w", ErrInvalidRoute)
	}
	cluster := t.cluster(clusterName)
	switch {
	case cluster == "":
		return Entry{}, fmt.Errorf("routes: CreateRoute: route %q: %s: %w", cut(route.DestinationCIDR), noCluster, ErrInvalidRoute)
	case nameHint == "":
		return Entry{}, fmt.Errorf("routes: CreateRoute: route %q: nameHint is empty: expected the node UID: %w", cut(route.DestinationCIDR), ErrInvalidRoute)
	case route.TargetNode == "":
		return Entry{}, fmt.Errorf("routes: CreateRoute: route %q: route.TargetNode is empty: expected a node name: %w", cut(route.DestinationCIDR), ErrInvalidRoute)
	}
	p, err := netip.ParsePrefix(route.DestinationCIDR)
	if err != nil {
		return Entry{}, fmt.Errorf("routes: CreateRoute: route.DestinationCIDR %q: expected a CIDR such as 10.244.1.0/24 or fd00:10:244:1::/64: %w", cut(route.DestinationCIDR), ErrInvalidRoute)
	}
	if t.opts.IPv4Only && !p.Addr().Is4() {
		return Entry{}, fmt.Errorf("routes: CreateRoute: route.DestinationCIDR %q for node %q is IPv6: expected IPv4, the cloud is configured IPv4Only: %w", cut(route.DestinationCIDR), cut(string(route.TargetNode)), ErrIPv6Unsupported)
	}
	return Entry{
		Name:                t.namer.Name(nameHint, route.DestinationCIDR),
		Cluster:             cluster,
		DestinationCIDR:     route.DestinationCIDR,
		TargetNode:          route.TargetNode,
		TargetNodeAddresses: slices.Clone(route.TargetNodeAddresses),
	}, nil
}

// DeleteRoute implements cloudprovider.Routes. route is a route as
// ListRoutes returned it; the routes owned by the Table's cluster identity
// (Options.ClusterID, or clusterName) with its Name (when not empty),
// DestinationCIDR and TargetNode are deleted. Deleting a route that does not
// exist succeeds. Throttled driver calls are retried within
// Options.MaxThrottleWait (see Table). Errors: ErrInvalidRoute for a nil
// route or an empty cluster identity; otherwise the driver's error, wrapped.
//
// With a TableDriver, if ctx ends before the call's batch completes, it
// returns an error wrapping ctx.Err() (errors.Is finds context.Canceled or
// context.DeadlineExceeded) that names the route and says what the call
// was waiting for: a batch to take it, its batch to start, the cloud's
// throttle, or its batch's table read and write, then wrapping too the
// result the batch left it, if any (a driver error that names what held
// the table up). The change is dropped if no batch has taken it yet and
// may still be applied if one has; the other calls of the batch are not
// affected (the batch's driver calls are cancelled only when every caller in
// it has given up). A caller leading a batch returns after the batch's
// driver calls, but at once if ctx ends while it waits out a throttle (the
// batch then goes on, led by the next caller waiting for it).
func (t *Table) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	if route == nil {
		return fmt.Errorf("routes: DeleteRoute: route is nil: expected a route as listed: %w", ErrInvalidRoute)
	}
	cluster := t.cluster(clusterName)
	if cluster == "" {
		return fmt.Errorf("routes: DeleteRoute: route %q: %s: %w", cut(route.Name), noCluster, ErrInvalidRoute)
	}
	e := Entry{
		Name:                route.Name,
		Cluster:             cluster,
		DestinationCIDR:     route.DestinationCIDR,
		TargetNode:          route.TargetNode,
		TargetNodeAddresses: slices.Clone(route.TargetNodeAddresses),
	}
	if t.routes != nil {
		return t.deleteOne(ctx, e)
	}
	return t.batch.do(ctx, t, &op{cluster: cluster, entry: e})
}

// deleteOne deletes through a RouteDriver; a route without a name is found
// by listing.
func (t *Table) deleteOne(ctx context.Context, e Entry) error {
	var waited time.Duration // shared by the calls below: one budget per DeleteRoute
	victims := []Entry{e}
	if e.Name == "" {
		var all []Entry
		err := t.retry(ctx, &waited, func() (err error) {
			all, err = t.routes.ListRoutes(ctx, e.Cluster)
			return err
		})
		if err != nil {
			return fmt.Errorf("routes: DeleteRoute: route %q -> node %q: list routes to find it: %w", cut(e.DestinationCIDR), cut(string(e.TargetNode)), err)
		}
		victims = victims[:0]
		for _, a := range all {
			if matchesListed(a, e) {
				victims = append(victims, a)
			}
		}
	}
	for _, v := range victims {
		err := t.retry(ctx, &waited, func() error { return t.routes.DeleteRoute(ctx, v) })
		if err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("routes: DeleteRoute: route %q %q -> node %q: %w", cut(v.Name), cut(v.DestinationCIDR), cut(string(v.TargetNode)), err)
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
