package routes

import (
	"context"
	"errors"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Errors the Table, its drivers and the Namer use. The Table wraps them with
// %w and context (the field, the value, what was expected); branch with
// errors.Is.
var (
	// ErrInvalidRoute reports a CreateRoute or DeleteRoute argument that
	// cannot be a route: an unparsable DestinationCIDR, an empty TargetNode,
	// nameHint or clusterName, or a nil route.
	ErrInvalidRoute = errors.New("invalid route")
	// ErrIPv6Unsupported reports an IPv6 DestinationCIDR given to a Table
	// whose Options.IPv4Only is set. It is returned before any driver call.
	ErrIPv6Unsupported = errors.New("the cloud has no IPv6 routes")
	// ErrCIDRInUse reports a CreateRoute whose destination is already taken
	// in a whole table by a route with another name (another node, another
	// cluster, or a route that is not a Kubernetes route). The route
	// controller deletes the stale route of its own cluster in the same
	// reconcile, so a retry usually succeeds.
	ErrCIDRInUse = errors.New("destination CIDR is already routed elsewhere")
	// ErrNotFound means the route named by the call does not exist: a
	// RouteDriver's DeleteRoute returns it, wrapped, for a route that is
	// gone. The Table turns it into success (delete is idempotent), so no
	// Table method returns it.
	ErrNotFound = errors.New("route not found")
	// ErrAlreadyExists is returned by a RouteDriver's CreateRoute when a
	// route with the same name exists. Names are derived from (nameHint,
	// CIDR), so the Table turns it into success (create is idempotent).
	ErrAlreadyExists = errors.New("route already exists")
	// ErrConflict is returned by a TableDriver's WriteTable when the table
	// changed since the revision it was given. The Table then reads the table
	// again and reapplies its batch, up to Options.ConflictRetries times.
	ErrConflict = errors.New("route table changed since it was read")
	// ErrForeignName is returned by Namer.Parse for a name that the Namer did
	// not produce (wrong prefix, alphabet, length or encoding).
	ErrForeignName = errors.New("route name was not made by this namer")
	// ErrHashedName is returned by Namer.Parse for a name the Namer produced
	// in its hashed form, which cannot be mapped back to (nameHint, CIDR).
	ErrHashedName = errors.New("route name is hashed and cannot be decoded")
)

// Entry is one route as the cloud stores it: what a driver lists, creates,
// deletes, reads and writes. The Table fills every field it creates and
// never modifies an entry it does not own.
//
// Entry is a plain value; the Table copies TargetNodeAddresses on the way in
// and out, so neither side aliases the other's slices.
type Entry struct {
	// Name is the cloud's name of the route. For routes the Table creates it
	// is Namer.Name(nameHint, DestinationCIDR).
	Name string
	// Cluster is the cluster that owns the route, stored by the driver as an
	// ownership tag: the Table's cluster identity, Options.ClusterID when set
	// and otherwise the clusterName of the cloudprovider.Routes calls.
	// Empty means the route belongs to no cluster (for example a default
	// route in a whole table); the Table never modifies such a route.
	Cluster string
	// DestinationCIDR is the destination exactly as CreateRoute got it. A
	// driver must return it byte-identical: the route controller compares
	// strings, and a re-rendered spelling ("fd00::0/64" for "fd00::/64")
	// makes it recreate the route forever. A driver whose cloud re-renders
	// destinations can recover the caller's spelling with Namer.Parse(Name).
	DestinationCIDR string
	// TargetNode is the name of the node the route sends traffic to. The
	// driver maps it to the cloud's next hop (an instance) and back.
	TargetNode types.NodeName
	// TargetNodeAddresses are the node addresses CreateRoute got; a driver
	// returns them unchanged (order included) so that the route controller,
	// with EnableNodeAddresses, does not replace the route on every sync.
	TargetNodeAddresses []v1.NodeAddress
	// Blackhole is set by a driver whose cloud knows that the route's next
	// hop is gone. The Table also lists as Blackhole a route whose target
	// has no instance (Options.Instances) or that has no TargetNode.
	Blackhole bool
	// Extra is driver-private data (a cloud route ID, a next-hop type). The
	// Table carries it unchanged through a whole-table read and write and
	// never looks at it.
	Extra any
}

// clone returns e with its own copy of TargetNodeAddresses.
func (e Entry) clone() Entry {
	e.TargetNodeAddresses = slices.Clone(e.TargetNodeAddresses)
	return e
}

// RouteDriver is a cloud whose API manages routes one at a time.
//
// The Table calls it concurrently (up to 200 calls at once from the route
// controller), so an implementation must be safe for concurrent use.
// Errors other than the sentinels below are returned to the route controller
// wrapped with the operation and the route.
//
// Throttling: when the cloud refuses a call for now (HTTP 429 with
// Retry-After: D, a rate-limit error code), return an error wrapping an
// *api.RetryError (k8s.io/cloud-provider/api, api.NewRetryError(msg, D))
// whose RetryAfter is D, or your best positive estimate when the cloud
// gives none. (Should a throttled call have taken effect after all, the
// retry is harmless: create and delete are idempotent.) This is ccmkit's one
// convention for "throttled, retry after D" in every block, found with
// errors.As. The Table waits D and calls again, within
// Options.MaxThrottleWait per Table call (see Table); a RetryAfter that is
// not positive is not retried.
type RouteDriver interface {
	// ListRoutes returns the routes of cluster, the Table's cluster
	// identity (Options.ClusterID, or the clusterName of the call). It may
	// return more (routes of other clusters, routes of no cluster): the
	// Table keeps only entries whose Cluster is cluster.
	ListRoutes(ctx context.Context, cluster string) ([]Entry, error)
	// CreateRoute creates e. e.Name, e.Cluster, e.DestinationCIDR and
	// e.TargetNode are set; store them (and e.TargetNodeAddresses) so that
	// ListRoutes returns them unchanged. If a route named e.Name exists,
	// return an error wrapping ErrAlreadyExists (or nil).
	CreateRoute(ctx context.Context, e Entry) error
	// DeleteRoute deletes the route e as ListRoutes returned it (Extra is
	// not carried: identify the route by e.Name, and e.Cluster). If there
	// is no such route, return an error wrapping ErrNotFound (or nil).
	DeleteRoute(ctx context.Context, e Entry) error
}

// TableDriver is a cloud whose API reads and replaces a whole route table
// (one table shared by every route, possibly by several clusters and by
// routes that are not Kubernetes routes).
//
// The Table never calls a TableDriver concurrently: every call (from
// ListRoutes and from batches of CreateRoute and DeleteRoute) is serialized,
// so an in-memory implementation needs no locking of its own on behalf of
// the Table.
//
// Throttling: as for RouteDriver, a throttled ReadTable or WriteTable
// returns an error wrapping an *api.RetryError with the delay D. The Table
// then retries the whole batch after D (one ReadTable, at most one
// WriteTable, for all the calls in it), not each of its calls, within
// Options.MaxThrottleWait; since the retry rereads the table, a throttled
// WriteTable that wrote after all is harmless.
type TableDriver interface {
	// ReadTable returns every entry of the table, in the cloud's order, and
	// an opaque revision that identifies this state of the table. A cloud
	// without revisions returns "".
	ReadTable(ctx context.Context) (entries []Entry, revision string, err error)
	// WriteTable replaces the table's contents with entries. revision is
	// what the ReadTable this write is based on returned; a cloud with
	// conditional writes returns an error wrapping ErrConflict when the
	// table has changed since. entries is owned by the driver after the call.
	WriteTable(ctx context.Context, revision string, entries []Entry) error
}

// InstanceChecker reports which route targets no longer have an instance,
// for ListRoutes to list their routes as Blackhole. It is called at most
// once per ListRoutes, with every distinct target of the listed routes, so a
// cloud answers it with one list call rather than one call per route.
type InstanceChecker interface {
	// GoneTargets returns the subset of nodes whose instance definitely no
	// longer exists. On any doubt it returns an error (ListRoutes then fails
	// rather than report live routes as Blackhole, which would make the
	// route controller delete them). It must be safe for concurrent use.
	GoneTargets(ctx context.Context, nodes []types.NodeName) ([]types.NodeName, error)
}
