package routes_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/routes"
)

// dualStack returns the routes of n dual-stack nodes with their name hints.
func dualStack(n, offset int) (hints []string, rs []*cloudprovider.Route) {
	for i := offset; i < offset+n; i++ {
		hint := fmt.Sprintf("00000000-0000-4000-8000-%012x", i)
		node := types.NodeName(fmt.Sprintf("node-%d", i))
		hints = append(hints, hint, hint)
		rs = append(rs,
			&cloudprovider.Route{TargetNode: node, DestinationCIDR: fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256)},
			&cloudprovider.Route{TargetNode: node, DestinationCIDR: fmt.Sprintf("fd00:10:%x::/64", i)})
	}
	return hints, rs
}

type routeID struct {
	Name, CIDR string
	Node       types.NodeName
}

func ids(t *routes.Table, hints []string, rs []*cloudprovider.Route) []routeID {
	var out []routeID
	for i, r := range rs {
		out = append(out, routeID{t.Namer().Name(hints[i], r.DestinationCIDR), r.DestinationCIDR, r.TargetNode})
	}
	return out
}

func storedIDs(entries []routes.Entry, clusterName string) []routeID {
	var out []routeID
	for _, e := range entries {
		if e.Cluster == clusterName {
			out = append(out, routeID{e.Name, e.DestinationCIDR, e.TargetNode})
		}
	}
	return out
}

var sortIDs = cmpopts.SortSlices(func(a, b routeID) bool { return a.Name < b.Name })

// createConcurrently makes the route controller's 200 concurrent
// CreateRoute calls (100 dual-stack nodes) on tbl, a Table over d, and
// checks that every call succeeded and d stores exactly those routes.
func createConcurrently(t *testing.T, tbl *routes.Table, d *memTable) {
	t.Helper()
	hints, rs := dualStack(100, 0)
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i := range rs {
		wg.Go(func() { errs[i] = tbl.CreateRoute(t.Context(), cluster, hints[i], rs[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent CreateRoute: %v", err)
	}
	if diff := cmp.Diff(ids(tbl, hints, rs), storedIDs(d.snapshot(), cluster), sortIDs); diff != "" {
		t.Errorf("final table (-want +got):\n%s", diff)
	}
}

// The route controller runs up to 200 CreateRoute calls at once
// (route_controller.go, maxConcurrentRouteOperations); on a whole table they
// coalesce into at most one write per batch.
func TestWholeTable200ConcurrentCreates(t *testing.T) {
	foreign := routes.Entry{Name: "igw", DestinationCIDR: "0.0.0.0/0", Extra: "igw-1"}
	d := &memTable{entries: []routes.Entry{foreign}}
	tbl, err := routes.NewWholeTable(d, routes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	createConcurrently(t, tbl, d)
	if got := d.snapshot(); len(got) != 201 || got[0].Name != "igw" || got[0].Extra != "igw-1" {
		t.Errorf("the foreign default route was not kept first and unchanged: table has %d entries, first %+v", len(got), got[0])
	}
	st := tbl.Stats()
	_, writes := d.counts()
	t.Logf("200 concurrent CreateRoute calls: %d batches, %d table writes (driver saw %d), %d conflicts", st.Batches, st.Writes, writes, st.Conflicts)
	if st.Writes > st.Batches || uint64(writes) != st.Writes { //nolint:gosec // G115: a call count, never negative
		t.Errorf("writes=%d (driver %d) batches=%d: want writes <= batches", st.Writes, writes, st.Batches)
	}
	if st.Calls != 200 {
		t.Errorf("Stats.Calls = %d, want 200", st.Calls)
	}
	if d.overlapped.Load() {
		t.Error("the Table called the TableDriver concurrently")
	}
}

// Deletes and creates of one reconcile run together; each caller gets its
// own result and the table ends right.
func TestWholeTableConcurrentDeletesAndCreates(t *testing.T) {
	d := &memTable{}
	tbl, err := routes.NewWholeTable(d, routes.Options{BatchWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	oldHints, old := dualStack(50, 0)
	for i := range old {
		mustCreate(t, tbl, oldHints[i], old[i])
	}
	listed := mustList(t, tbl)
	newHints, fresh := dualStack(50, 50)
	// One new route collides with a route of another cluster.
	d.mu.Lock()
	d.entries = append(d.entries, routes.Entry{Name: "theirs", Cluster: "other", DestinationCIDR: fresh[0].DestinationCIDR, TargetNode: "x"})
	d.mu.Unlock()

	before := tbl.Stats()
	var wg sync.WaitGroup
	delErrs := make([]error, len(listed))
	newErrs := make([]error, len(fresh))
	for i := range listed {
		wg.Go(func() { delErrs[i] = tbl.DeleteRoute(t.Context(), cluster, listed[i]) })
	}
	for i := range fresh {
		wg.Go(func() { newErrs[i] = tbl.CreateRoute(t.Context(), cluster, newHints[i], fresh[i]) })
	}
	wg.Wait()
	if err := errors.Join(delErrs...); err != nil {
		t.Errorf("DeleteRoute: %v", err)
	}
	if !errors.Is(newErrs[0], routes.ErrCIDRInUse) {
		t.Errorf("CreateRoute of a destination held by another cluster = %v, want ErrCIDRInUse", newErrs[0])
	}
	if err := errors.Join(newErrs[1:]...); err != nil {
		t.Errorf("CreateRoute: %v: one caller's conflict must not fail the others", err)
	}
	if diff := cmp.Diff(ids(tbl, newHints[1:], fresh[1:]), storedIDs(d.snapshot(), cluster), sortIDs); diff != "" {
		t.Errorf("final table (-want +got):\n%s", diff)
	}
	st := tbl.Stats()
	batches, writes := st.Batches-before.Batches, st.Writes-before.Writes
	t.Logf("100 concurrent deletes + 100 creates: %d batches, %d table writes", batches, writes)
	if writes > batches {
		t.Errorf("writes %d > batches %d", writes, batches)
	}
}

func TestWholeTableConflictRetry(t *testing.T) {
	d := &memTable{conflicts: 2}
	tbl, err := routes.NewWholeTable(d, routes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, tbl, uidA, route("node-a", "10.244.1.0/24"))
	if st := tbl.Stats(); st.Conflicts != 2 || st.Writes != 3 || st.Batches != 1 {
		t.Errorf("Stats = %+v, want 1 batch, 3 writes, 2 conflicts (reread and rewrite)", st)
	}
	if got := len(d.snapshot()); got != 1 {
		t.Errorf("table has %d routes, want 1", got)
	}

	d.conflicts = 100
	err = tbl.CreateRoute(t.Context(), cluster, uidB, route("node-b", "10.244.2.0/24"))
	if !errors.Is(err, routes.ErrConflict) {
		t.Errorf("CreateRoute after %d conflicts = %v, want ErrConflict", defaultConflictRetries+1, err)
	}
}

func TestWholeTableDriverErrors(t *testing.T) {
	boom := errors.New("cloud API unavailable")
	d := &memTable{}
	tbl, err := routes.NewWholeTable(d, routes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, tbl, uidA, route("node-a", "10.244.1.0/24"))
	d.writeErr = boom
	if err := tbl.CreateRoute(t.Context(), cluster, uidA, route("node-a", "10.244.1.0/24")); err != nil {
		t.Errorf("CreateRoute of an existing route while writes fail = %v, want nil: nothing to write", err)
	}
	// Each error starts with the method's name, as the per-route Table's
	// do, although a batch's read and write serve both methods.
	err = tbl.CreateRoute(t.Context(), cluster, uidB, route("node-b", "10.244.2.0/24"))
	if want := "routes: CreateRoute: write route table (1 calls in the batch): "; !errors.Is(err, boom) || !strings.HasPrefix(fmt.Sprint(err), want) {
		t.Errorf("CreateRoute while writes fail = %v, want the write error wrapped after %q", err, want)
	}
	d.writeErr, d.readErr = nil, boom
	err = tbl.DeleteRoute(t.Context(), cluster, route("node-a", "10.244.1.0/24"))
	if want := "routes: DeleteRoute: read route table: "; !errors.Is(err, boom) || !strings.HasPrefix(fmt.Sprint(err), want) {
		t.Errorf("DeleteRoute while reads fail = %v, want the read error wrapped after %q", err, want)
	}
	if _, err := tbl.ListRoutes(t.Context(), cluster); !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "routes: ListRoutes: ") {
		t.Errorf("ListRoutes while reads fail = %v, want the read error wrapped after %q", err, "routes: ListRoutes: ")
	}
}

// TestWholeTableConflictRetriesNegative: a negative ConflictRetries means
// none (A4): the first conflict fails the batch, after one write.
func TestWholeTableConflictRetriesNegative(t *testing.T) {
	d := &memTable{conflicts: 1}
	tbl, err := routes.NewWholeTable(d, routes.Options{ConflictRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	err = tbl.CreateRoute(t.Context(), cluster, uidA, route("node-a", "10.244.1.0/24"))
	if st := tbl.Stats(); !errors.Is(err, routes.ErrConflict) || st.Writes != 1 || st.Conflicts != 1 {
		t.Errorf("CreateRoute = %v, Stats %+v; want ErrConflict after 1 write and no retry", err, st)
	}
}
