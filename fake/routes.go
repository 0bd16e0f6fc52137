package fake

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/netaddr"
	"github.com/ccmkit/ccmkit/routes"
)

// routeDriver is the fake's routes.TableDriver: one route table for the
// whole cloud, read and replaced as a whole, with a revision that makes a
// write based on a stale read fail with routes.ErrConflict.
type routeDriver struct{ s *store }

var _ routes.TableDriver = routeDriver{}

// ReadTable returns the table and its revision. Stored entries are never
// modified (WriteTable replaces them), so the copy shares their address
// slices.
func (d routeDriver) ReadTable(ctx context.Context) (entries []routes.Entry, rev string, err error) {
	err = d.s.readCtx(ctx, func() error {
		entries, rev = append([]routes.Entry(nil), d.s.routes...), strconv.FormatUint(d.s.routeRev, 10)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return entries, rev, nil
}

// WriteTable replaces the table if it is still at revision and every
// route it adds or changes keeps the route table's rules (package
// documentation, "Routes"); otherwise it changes nothing. Errors wrap
// routes.ErrConflict, routes.ErrInvalidRoute or routes.ErrCIDRInUse (never
// an *api.RetryError: a rejected table is not retried as a throttled one).
func (d routeDriver) WriteTable(ctx context.Context, revision string, entries []routes.Entry) error {
	return d.s.writeCtx(ctx, func() (bool, error) {
		if cur := strconv.FormatUint(d.s.routeRev, 10); revision != cur {
			return false, fmt.Errorf("fake: route table is at revision %s, the write is based on %q: %w", cur, revision, routes.ErrConflict)
		}
		if err := d.s.setRoutes(entries, tablePath); err != nil {
			return false, fmt.Errorf("fake: route table write: %w", err)
		}
		return true, nil
	})
}

// goneTargets is the routes.InstanceChecker of the fake's route table: a
// target is gone when an instance of that name was terminated and no live
// instance has the name. A target no instance is named after is not
// reported gone: its Node may be named unlike its instance (a kubelet run
// with --hostname-override), and a route listed as Blackhole is deleted
// by the route controller and created again on its next sync, forever
// (k8s.io/cloud-provider@v0.37.2 controllers/route/route_controller.go
// reconcile). Such a route goes when its Node does. It lists the
// instances with one call of the instrumented API, so the answer is never
// staler than the call.
type goneTargets struct{ api instances.ListDriver }

func (g goneTargets) GoneTargets(ctx context.Context, nodes []types.NodeName) ([]types.NodeName, error) {
	list, err := g.api.List(ctx)
	if err != nil {
		return nil, err
	}
	live, terminated := map[string]bool{}, map[string]bool{}
	for _, in := range list {
		if in.State == instances.StateTerminated {
			terminated[in.Name] = true
		} else {
			live[in.Name] = true
		}
	}
	var gone []types.NodeName
	for _, n := range nodes {
		if terminated[string(n)] && !live[string(n)] {
			gone = append(gone, n)
		}
	}
	return gone, nil
}

// addRoute adds e to the table as is (control surface: seeding routes the
// Table did not create, such as routes of no cluster), if it keeps the
// route table's rules (see Route); the error names
// e "route".
func (s *store) addRoute(e routes.Entry) error {
	return s.write(func() (bool, error) {
		next := append(slices.Clone(s.routes), e)
		err := s.setRoutes(next, func(i int) *field.Path {
			if i == len(next)-1 {
				return field.NewPath("route")
			}
			return tablePath(i)
		})
		if err != nil {
			return false, fmt.Errorf("fake: %w", err)
		}
		s.routeChanged()
		return true, nil
	})
}

// setRoutes makes entries the route table, a new revision, if they keep
// the route table's rules, and leaves the state unchanged otherwise: the
// one way into the table, for a table write, AddRoute and a state file
// being loaded (store.mu held for writing, or the state not shared yet).
func (st *cloudState) setRoutes(entries []routes.Entry, path func(i int) *field.Path) error {
	if err := st.routeIdx.replace(st.routes, entries, path); err != nil {
		return err
	}
	st.routes = entries
	st.routeRev++
	return nil
}

// tablePath names the i-th route of a whole table (a write, a state file)
// in errors.
func tablePath(i int) *field.Path { return field.NewPath("routes").Index(i) }

// The route table's rules are stated once, in the doc of Route: every
// way into the table applies them (a routes.Table write
// through CreateRoute or DeleteRoute, AddRoute, a state file being
// loaded). validateRoute checks the fields of one route, routeIndex.replace
// the names and destinations of the routes together. Values quoted in
// errors are cut to a bounded length (clipValue).

// nodeAddressTypes are the node address types a route's target addresses
// may have (v1.NodeAddressType).
var nodeAddressTypes = []string{
	string(v1.NodeInternalIP), string(v1.NodeExternalIP), string(v1.NodeInternalDNS), string(v1.NodeExternalDNS), string(v1.NodeHostName),
}

// validateRoute checks the fields of one route against the route table's
// rules (all but names and overlap, which need the table) and returns its
// masked destination; path names the route in errors.
func validateRoute(path *field.Path, e routes.Entry) (netip.Prefix, field.ErrorList) {
	var errs field.ErrorList
	p, err := parseDestination(path.Child("destinationCIDR"), e)
	if err != nil {
		errs = append(errs, err)
	}
	if n := string(e.TargetNode); n != "" {
		errs = append(errs, check.Field(path.Child("targetNode"), n, validation.IsDNS1123Subdomain, "expected a Node name (a DNS-1123 subdomain)")...)
	}
	for i, a := range e.TargetNodeAddresses {
		p := path.Child("targetNodeAddresses").Index(i)
		switch a.Type {
		case v1.NodeInternalIP, v1.NodeExternalIP:
			if _, problem := netaddr.NodeIP(a.Address); problem != "" {
				errs = append(errs, field.Invalid(p.Child("address"), clipValue(a.Address), problem+" (the address type is "+string(a.Type)+")"))
			}
		case v1.NodeInternalDNS, v1.NodeExternalDNS, v1.NodeHostName:
			errs = append(errs, check.Field(p.Child("address"), a.Address, validation.IsDNS1123Subdomain, "expected a DNS-1123 subdomain (the address type is "+string(a.Type)+")")...)
		default:
			errs = append(errs, field.NotSupported(p.Child("type"), clipValue(string(a.Type)), nodeAddressTypes))
		}
	}
	return p, errs
}

// parseDestination parses e's destination and returns it masked; path
// names it in the error. Host bits and IPv4-mapped IPv6 are refused as
// Kubernetes' strict CIDR validation refuses them (k8s.io/apimachinery
// pkg/util/validation/ip.go, parseCIDR), and so is a zone, which
// netip.ParsePrefix refuses too.
func parseDestination(path *field.Path, e routes.Entry) (netip.Prefix, *field.Error) {
	s := e.DestinationCIDR
	invalid := func(detail string) (netip.Prefix, *field.Error) {
		return netip.Prefix{}, field.Invalid(path, clipValue(s), detail)
	}
	if strings.Contains(s, "%") {
		return invalid("expected a CIDR without zone: a destination is a network, not an interface's address")
	}
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return invalid("expected a CIDR such as 10.244.1.0/24 or fd00:10:244:1::/64")
	case p.Addr().Is4In6():
		return invalid(fmt.Sprintf("expected an IPv4 CIDR in dotted form (%s), not IPv4-mapped IPv6", netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0)).Masked()))
	case p != p.Masked():
		return invalid(fmt.Sprintf("expected the network address %s (host bits set)", p.Masked()))
	case e.Cluster != "" && p.Bits() == 0:
		return invalid("expected a pod CIDR, with a prefix length above 0: a default route is not a pod route (only a route of no cluster may be one)")
	}
	return p.Masked(), nil
}

// routeKey is a route's identity in the table: its cluster and name.
type routeKey struct{ cluster, name string }

func keyOf(e *routes.Entry) routeKey { return routeKey{e.Cluster, e.Name} }

// routeIndex indexes a route table for its rules: every route by key,
// and the destinations of cluster routes by masked prefix, with how many
// of them lie strictly inside each shorter prefix, so that a change is
// checked in time proportional to the routes it adds and the table's
// length, never to the square of it. Each stored entry's Extra (which a
// routes.Table carries unchanged from ReadTable to WriteTable, and the
// state file does not keep) is its *indexedRoute, so a route written back
// unchanged is recognised without a look-up. It belongs to a cloudState
// and changes only through replace (store.mu held for writing).
type routeIndex struct {
	byKey  map[routeKey]*indexedRoute
	dests  map[netip.Prefix]*indexedRoute // cluster routes only
	inside map[netip.Prefix]int           // cluster-route destinations strictly inside each prefix
	mark   uint64                         // the latest replace
}

// indexedRoute is a route of the table as the index keeps it.
type indexedRoute struct {
	routes.Entry
	dest  netip.Prefix // the masked destination
	index *routeIndex  // the index it is in; nil once it left the table
	mark  uint64       // the replace that last saw it
	at    int          // its position in the table of that replace
}

func newRouteIndex() *routeIndex {
	return &routeIndex{byKey: map[routeKey]*indexedRoute{}, dests: map[netip.Prefix]*indexedRoute{}, inside: map[netip.Prefix]int{}}
}

// replace makes entries, the whole next table, the indexed table instead
// of old, the current one, if it keeps the route table's rules, and sets
// each entry's Extra to its record; otherwise it returns the first
// violation found, naming the route with path(i), and leaves the index as
// it was (entries may have had their Extra set: discard them). Routes of
// the current table written back unchanged are not checked again. Errors
// wrap routes.ErrInvalidRoute (a field, a repeated name) or
// routes.ErrCIDRInUse (an overlap).
//
// Its steps, in order: match marks the routes of the current table that
// entries keeps and finds the ones it adds or changes; leftOut finds the
// current routes entries drops; build validates the added and changed
// ones; swapDestinations moves the destination index from the routes that
// go to those that come, checking overlap; commit rekeys byKey. Only the
// last two change byKey, dests and inside, and swapDestinations undoes
// its change on refusal.
func (x *routeIndex) replace(old, entries []routes.Entry, path func(i int) *field.Path) error {
	x.mark++
	changed, gone, err := x.match(entries, path)
	if err != nil {
		return err
	}
	gone = append(gone, x.leftOut(old)...)
	added, err := x.build(entries, changed, path)
	if err != nil {
		return err
	}
	if err := x.swapDestinations(gone, added, path); err != nil {
		return err
	}
	x.commit(gone, added, entries)
	return nil
}

// match marks with the current mark every indexed route that entries
// keeps under its key, and returns the positions in entries of the routes
// that are new or changed, and the indexed routes that the changed ones
// replace. A name repeated within a cluster is an error wrapping
// routes.ErrInvalidRoute, naming both positions with path.
func (x *routeIndex) match(entries []routes.Entry, path func(i int) *field.Path) (changed []int, gone []*indexedRoute, err error) {
	var fresh map[routeKey]int // keys of the new routes, by position
	for i := range entries {
		e := &entries[i]
		if r, ok := e.Extra.(*indexedRoute); ok && r.index == x && r.mark != x.mark && sameRoute(&r.Entry, e) {
			r.mark, r.at = x.mark, i // unchanged, and read from this table: no look-up
			continue
		}
		k := keyOf(e)
		r := x.byKey[k]
		if r != nil && r.mark != x.mark {
			r.mark, r.at = x.mark, i
			if sameRoute(&r.Entry, e) {
				e.Extra = r
			} else {
				changed, gone = append(changed, i), append(gone, r)
			}
			continue
		}
		at, dup := fresh[k]
		if r != nil {
			at, dup = r.at, true
		}
		if dup {
			err := field.Invalid(path(i).Child("name"), clipValue(e.Name), fmt.Sprintf("expected each route name once per cluster: duplicates %s of cluster %s", path(at).Child("name"), clip(e.Cluster)))
			return nil, nil, routeError(routes.ErrInvalidRoute, e, field.ErrorList{err})
		}
		if fresh == nil {
			fresh = map[routeKey]int{}
		}
		fresh[k] = i
		changed = append(changed, i)
	}
	return changed, gone, nil
}

// leftOut returns the routes of old, the current table, that match left
// unmarked: those the next table no longer has.
func (x *routeIndex) leftOut(old []routes.Entry) []*indexedRoute {
	var gone []*indexedRoute
	for i := range old {
		r, ok := old[i].Extra.(*indexedRoute)
		if !ok { // never: replace sets it; kept for safety
			r = x.byKey[keyOf(&old[i])]
		}
		if r != nil && r.mark != x.mark {
			gone = append(gone, r)
		}
	}
	return gone
}

// build validates the routes of entries at the positions changed and
// returns their records, not yet indexed; the first route that breaks a
// field rule is an error wrapping routes.ErrInvalidRoute, named with path.
func (x *routeIndex) build(entries []routes.Entry, changed []int, path func(i int) *field.Path) ([]*indexedRoute, error) {
	added := make([]*indexedRoute, len(changed))
	for j, i := range changed {
		p, errs := validateRoute(path(i), entries[i])
		if len(errs) > 0 {
			return nil, routeError(routes.ErrInvalidRoute, &entries[i], errs)
		}
		added[j] = &indexedRoute{Entry: entries[i], dest: p, index: x, mark: x.mark, at: i}
	}
	return added, nil
}

// swapDestinations takes the destinations of gone out of dests and inside
// and puts those of added in, refusing an added cluster route that
// overlaps one already there (the table's other routes, or an added one
// before it) with an error wrapping routes.ErrCIDRInUse, named with path;
// on refusal it puts dests and inside back as they were.
func (x *routeIndex) swapDestinations(gone, added []*indexedRoute, path func(i int) *field.Path) error {
	for _, r := range gone {
		x.unindex(r)
	}
	for j, r := range added {
		if r.Cluster == "" {
			continue
		}
		if other := x.overlapping(r.dest, true); other != nil {
			for _, a := range added[:j] {
				x.unindex(a)
			}
			for _, g := range gone {
				x.index(g)
			}
			err := overlapError(path(r.at).Child("destinationCIDR"), &r.Entry, r.dest, other)
			return routeError(routes.ErrCIDRInUse, &r.Entry, field.ErrorList{err})
		}
		x.index(r)
	}
	return nil
}

// commit makes the accepted change final: gone leave byKey and the index,
// added enter byKey, and each added route's entry gets its record as
// Extra.
func (x *routeIndex) commit(gone, added []*indexedRoute, entries []routes.Entry) {
	for _, r := range gone {
		delete(x.byKey, keyOf(&r.Entry))
		r.index = nil
	}
	for _, r := range added {
		x.byKey[keyOf(&r.Entry)] = r
		entries[r.at].Extra = r
	}
}

// index adds a cluster route's destination to dests and inside; unindex
// removes it. Routes of no cluster are not in them.
func (x *routeIndex) index(r *indexedRoute) {
	if r.Cluster == "" {
		return
	}
	x.dests[r.dest] = r
	for b := range r.dest.Bits() {
		x.inside[netip.PrefixFrom(r.dest.Addr(), b).Masked()]++
	}
}

func (x *routeIndex) unindex(r *indexedRoute) {
	if r.Cluster == "" {
		return
	}
	delete(x.dests, r.dest)
	for b := range r.dest.Bits() {
		k := netip.PrefixFrom(r.dest.Addr(), b).Masked()
		if x.inside[k]--; x.inside[k] == 0 {
			delete(x.inside, k)
		}
	}
}

// overlapping returns a cluster route whose destination contains or lies
// in p (a masked prefix), or equals it when equal is set; nil when there
// is none. With several it returns the one with the shortest prefix that
// contains p, else the lowest one inside p.
func (x *routeIndex) overlapping(p netip.Prefix, equal bool) *indexedRoute {
	for b := range p.Bits() + 1 {
		if b == p.Bits() && !equal {
			break
		}
		if r := x.dests[netip.PrefixFrom(p.Addr(), b).Masked()]; r != nil {
			return r
		}
	}
	if x.inside[p] == 0 {
		return nil
	}
	var found *indexedRoute // rare (an error): a scan is fine
	for q, r := range x.dests {
		if q.Bits() > p.Bits() && p.Overlaps(q) && (found == nil || comparePrefixes(q, found.dest) < 0) {
			found = r
		}
	}
	return found
}

func comparePrefixes(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

// sameRoute reports whether a and b are the same stored route (Extra, the
// index's record, aside).
func sameRoute(a, b *routes.Entry) bool {
	return a.Cluster == b.Cluster && a.Name == b.Name && a.DestinationCIDR == b.DestinationCIDR &&
		a.TargetNode == b.TargetNode && a.Blackhole == b.Blackhole && slices.Equal(a.TargetNodeAddresses, b.TargetNodeAddresses)
}

// routeError is the error for route e, which breaks the rules as errs
// say, wrapping sentinel.
func routeError(sentinel error, e *routes.Entry, errs field.ErrorList) error {
	return fmt.Errorf("%w: route %s of cluster %s: %w", sentinel, clip(e.Name), clip(e.Cluster), errs.ToAggregate())
}

// overlapError says that e's destination p (masked) overlaps other's;
// path names e's destination.
func overlapError(path *field.Path, e *routes.Entry, p netip.Prefix, other *indexedRoute) *field.Error {
	rel := "lies in"
	switch {
	case other.dest == p:
		rel = "equals"
	case other.dest.Bits() > p.Bits():
		rel = "contains"
	}
	return field.Invalid(path, clipValue(e.DestinationCIDR), fmt.Sprintf(
		"expected a destination that overlaps no other cluster route's (one network, one pod-route destination per packet): it %s %s, the destination of route %s of cluster %s",
		rel, clip(other.DestinationCIDR), clip(other.Name), clip(other.Cluster)))
}

// checkCreate checks a CreateRoute of route for cluster (the Table's
// cluster identity) against the rules of the route table, with the table
// last loaded, before the routes.Table batches it: a route the cloud
// refuses then fails alone. What the Table refuses by itself (a
// destination that does not parse, an empty cluster or target node) is
// left to it, and so is a destination equal to another route's
// (ErrCIDRInUse, or a replacement of the route of the same name): the
// Table applies the deletions of its batch first. Errors wrap
// routes.ErrInvalidRoute or routes.ErrCIDRInUse.
func (s *store) checkCreate(cluster string, route *cloudprovider.Route) error {
	if _, err := netip.ParsePrefix(route.DestinationCIDR); err != nil || cluster == "" {
		return nil // the Table refuses it, naming it its way
	}
	e := routes.Entry{Cluster: cluster, DestinationCIDR: route.DestinationCIDR, TargetNode: route.TargetNode, TargetNodeAddresses: route.TargetNodeAddresses}
	path := field.NewPath("route")
	p, errs := validateRoute(path, e)
	if len(errs) > 0 {
		return fmt.Errorf("fake: %w: %w", routes.ErrInvalidRoute, errs.ToAggregate())
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if other := s.routeIdx.overlapping(p, false); other != nil {
		return fmt.Errorf("fake: %w: %w", routes.ErrCIDRInUse, overlapError(path.Child("destinationCIDR"), &e, p, other))
	}
	return nil
}

// checkedRoutes is the fake's cloudprovider.Routes: the routes.Table, with
// each CreateRoute first checked by checkCreate, as a cloud API that
// creates one route at a time would, so that a route the cloud refuses
// fails alone rather than failing the table write of its whole batch
// (WriteTable checks again, against the table as it is then). The check
// makes no cloud API call.
type checkedRoutes struct {
	*routes.Table
	s         *store
	clusterID string // Config.ClusterID
}

// CreateRoute implements cloudprovider.Routes: routes.Table.CreateRoute,
// after checkCreate.
func (r checkedRoutes) CreateRoute(ctx context.Context, clusterName, nameHint string, route *cloudprovider.Route) error {
	if route != nil {
		if err := r.s.checkCreate(cmp.Or(r.clusterID, clusterName), route); err != nil {
			return err
		}
	}
	return r.Table.CreateRoute(ctx, clusterName, nameHint, route)
}

// table is a route table read: its entries and revision, one value for
// gate.
type table struct {
	entries  []routes.Entry
	revision string
}

func (a cloudAPI) ReadTable(ctx context.Context) ([]routes.Entry, string, error) {
	t, err := gate(ctx, a, OpReadRouteTable, func(f *Funcs, next cloudAPI) (t table, err error) {
		if f == nil || f.ReadRouteTable == nil {
			t.entries, t.revision, err = routeDriver{a.s}.ReadTable(ctx)
		} else {
			t.entries, t.revision, err = f.ReadRouteTable(ctx, next)
		}
		return t, err
	})
	return t.entries, t.revision, err
}

func (a cloudAPI) WriteTable(ctx context.Context, revision string, entries []routes.Entry) error {
	return gateErr(ctx, a, OpWriteRouteTable, func(f *Funcs, next cloudAPI) error {
		if f == nil || f.WriteRouteTable == nil {
			return routeDriver{a.s}.WriteTable(ctx, revision, entries)
		}
		return f.WriteRouteTable(ctx, next, revision, entries)
	})
}
