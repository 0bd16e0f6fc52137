package routes_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/routes"
)

const cluster = "kubernetes"

// backend makes a Table over one kind of driver, seeded with entries, and
// reports what the driver stores and how many calls it got.
type backend struct {
	name string
	make func(t *testing.T, c routes.Options, seed ...routes.Entry) (tbl *routes.Table, stored func() []routes.Entry, calls func() int)
}

var backends = []backend{
	{"per-route", func(t *testing.T, c routes.Options, seed ...routes.Entry) (*routes.Table, func() []routes.Entry, func() int) {
		d := &memRoutes{entries: seed}
		tbl, err := routes.NewTable(d, c)
		if err != nil {
			t.Fatalf("NewTable: %v", err)
		}
		return tbl, d.snapshot, d.calls
	}},
	{"whole-table", func(t *testing.T, c routes.Options, seed ...routes.Entry) (*routes.Table, func() []routes.Entry, func() int) {
		d := &memTable{entries: seed}
		tbl, err := routes.NewWholeTable(d, c)
		if err != nil {
			t.Fatalf("NewWholeTable: %v", err)
		}
		t.Cleanup(func() {
			if d.overlapped.Load() {
				t.Error("the Table called the TableDriver concurrently; it promises to serialize calls")
			}
		})
		return tbl, d.snapshot, func() int { r, w := d.counts(); return r + w }
	}},
}

func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

func addrs(ips ...string) []v1.NodeAddress {
	var out []v1.NodeAddress
	for _, ip := range ips {
		out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	return out
}

func route(node, cidr string) *cloudprovider.Route {
	return &cloudprovider.Route{TargetNode: types.NodeName(node), DestinationCIDR: cidr}
}

func mustList(t *testing.T, tbl *routes.Table) []*cloudprovider.Route {
	t.Helper()
	got, err := tbl.ListRoutes(t.Context(), cluster)
	if err != nil {
		t.Fatalf("ListRoutes: %v", err)
	}
	return got
}

func mustCreate(t *testing.T, tbl *routes.Table, hint string, r *cloudprovider.Route) {
	t.Helper()
	if err := tbl.CreateRoute(t.Context(), cluster, hint, r); err != nil {
		t.Fatalf("CreateRoute(%q, %s): %v", hint, r.DestinationCIDR, err)
	}
}

var sortRoutes = cmpopts.SortSlices(func(a, b *cloudprovider.Route) bool { return a.Name < b.Name })

const (
	uidA = "0d4c5f1e-8f4a-4c49-9a39-2f1b5f8e6a01"
	uidB = "6a1f7f52-3b0e-4d2a-8c4b-0c9e1d2f3a02"
)

// The route controller matches a listed route to spec.podCIDRs by string
// (route_controller.go, getRouteAction): any spelling CreateRoute got must
// come back from ListRoutes byte for byte.
func TestTableKeepsCIDRSpelling(t *testing.T) {
	spellings := []struct {
		name, cidr, reason string
	}{
		{"ipv4", "10.244.1.0/24", "canonical IPv4"},
		{"ipv4 host bits", "10.244.2.7/24", "host bits set: a re-rendering would mask them"},
		{"ipv6", "fd00:10:244:1::/64", "canonical IPv6"},
		{"ipv6 leading zeros", "fd00:0010:0244:0002::/64", "zero-padded groups: a re-rendering would drop them"},
		{"ipv6 uppercase", "FD00:10:244:3::/64", "uppercase hex: a re-rendering would lowercase it"},
		{"ipv6 uncompressed", "fd00:10:244:4:0:0:0:0/64", "no :: compression"},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, s := range spellings {
			t.Run(s.name, func(t *testing.T) {
				tbl, _, _ := b.make(t, routes.Options{})
				mustCreate(t, tbl, uidA, route("node-a", s.cidr))
				got := mustList(t, tbl)
				if len(got) != 1 || got[0].DestinationCIDR != s.cidr {
					t.Fatalf("%s: listed %+v, want one route with DestinationCIDR %q", s.reason, got, s.cidr)
				}
			})
		}
	})
}

// nameHint (the node UID) is shared by a dual-stack node's CIDRs; route.Name
// is ignored by CreateRoute (cloud.go, Routes.CreateRoute).
func TestTableNamesPerNodeAndCIDR(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		tbl, stored, _ := b.make(t, routes.Options{})
		for _, r := range []*cloudprovider.Route{route("node-a", "10.244.1.0/24"), route("node-a", "fd00:10:244:1::/64"), route("node-b", "10.244.2.0/24")} {
			r.Name = "ignored-by-create"
			hint := uidA
			if r.TargetNode == "node-b" {
				hint = uidB
			}
			mustCreate(t, tbl, hint, r)
		}
		n := tbl.Namer()
		want := []*cloudprovider.Route{
			{Name: n.Name(uidA, "10.244.1.0/24"), TargetNode: "node-a", DestinationCIDR: "10.244.1.0/24"},
			{Name: n.Name(uidA, "fd00:10:244:1::/64"), TargetNode: "node-a", DestinationCIDR: "fd00:10:244:1::/64"},
			{Name: n.Name(uidB, "10.244.2.0/24"), TargetNode: "node-b", DestinationCIDR: "10.244.2.0/24"},
		}
		if diff := cmp.Diff(want, mustList(t, tbl), sortRoutes, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ListRoutes (-want +got):\n%s", diff)
		}
		seen := map[string]bool{}
		for _, e := range stored() {
			if seen[e.Name] {
				t.Errorf("name %q stored twice: names must be unique per (nameHint, CIDR)", e.Name)
			}
			seen[e.Name] = true
			if e.Cluster != cluster {
				t.Errorf("stored entry %q has Cluster %q, want %q (the ownership tag)", e.Name, e.Cluster, cluster)
			}
		}
	})
}

func TestTableCreateAndDeleteAreIdempotent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		tbl, stored, _ := b.make(t, routes.Options{})
		mustCreate(t, tbl, uidA, route("node-a", "10.244.1.0/24"))
		mustCreate(t, tbl, uidA, route("node-a", "10.244.1.0/24"))
		if got := len(stored()); got != 1 {
			t.Fatalf("after creating one route twice the driver stores %d routes, want 1", got)
		}
		writes := tbl.Stats().Writes
		mustCreate(t, tbl, uidA, route("node-a", "10.244.1.0/24"))
		if got := tbl.Stats().Writes; got != writes {
			t.Errorf("a create of an existing identical route wrote the table (%d writes, want %d): converged must write nothing", got, writes)
		}
		listed := mustList(t, tbl)
		for i := range 2 {
			if err := tbl.DeleteRoute(t.Context(), cluster, listed[0]); err != nil {
				t.Fatalf("DeleteRoute #%d: %v (want nil: delete is idempotent)", i+1, err)
			}
		}
		if got := stored(); len(got) != 0 {
			t.Errorf("after delete the driver stores %+v, want nothing", got)
		}
		if err := tbl.DeleteRoute(t.Context(), cluster, &cloudprovider.Route{Name: "never-existed", DestinationCIDR: "10.9.9.0/24", TargetNode: "x"}); err != nil {
			t.Errorf("DeleteRoute of an unknown route: %v, want nil", err)
		}
	})
}

func TestTableRejectsIPv6Early(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		tbl, stored, calls := b.make(t, routes.Options{IPv4Only: true})
		err := tbl.CreateRoute(t.Context(), cluster, uidA, route("node-a", "fd00:10:244:1::/64"))
		if !errors.Is(err, routes.ErrIPv6Unsupported) {
			t.Fatalf("CreateRoute(IPv6) on an IPv4Only table = %v, want ErrIPv6Unsupported", err)
		}
		for _, want := range []string{"fd00:10:244:1::/64", "node-a", "IPv4Only"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
		if n := calls(); n != 0 {
			t.Errorf("the driver got %d calls, want 0: IPv6 must be rejected before any cloud call", n)
		}
		mustCreate(t, tbl, uidA, route("node-a", "10.244.1.0/24"))
		if got := len(stored()); got != 1 {
			t.Errorf("IPv4 route on an IPv4Only table: driver stores %d routes, want 1", got)
		}
	})
}

func TestTableRejectsInvalidInput(t *testing.T) {
	cases := []struct {
		name, reason, cluster, hint string
		route                       *cloudprovider.Route
		wantInMsg                   string
	}{
		{"nil route", "the controller never passes nil; a caller that does gets an error, not a panic", cluster, uidA, nil, "route is nil"},
		{"no cluster", "an empty cluster would create an unowned route", "", uidA, route("n", "10.0.0.0/24"), "clusterName"},
		{"no hint", "names derive from the node UID", cluster, "", route("n", "10.0.0.0/24"), "nameHint"},
		{"no target", "a route needs a next hop", cluster, uidA, route("", "10.0.0.0/24"), "TargetNode"},
		{"bad cidr", "the destination must parse", cluster, uidA, route("n", "10.0.0.0/33"), `"10.0.0.0/33"`},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				tbl, _, calls := b.make(t, routes.Options{})
				err := tbl.CreateRoute(t.Context(), c.cluster, c.hint, c.route)
				if !errors.Is(err, routes.ErrInvalidRoute) || !strings.Contains(err.Error(), c.wantInMsg) {
					t.Errorf("%s: CreateRoute = %v, want ErrInvalidRoute mentioning %s", c.reason, err, c.wantInMsg)
				}
				if n := calls(); n != 0 {
					t.Errorf("%s: %d driver calls, want 0", c.reason, n)
				}
			})
		}
		tbl, _, _ := b.make(t, routes.Options{})
		if err := tbl.DeleteRoute(t.Context(), cluster, nil); !errors.Is(err, routes.ErrInvalidRoute) {
			t.Errorf("DeleteRoute(nil) = %v, want ErrInvalidRoute", err)
		}
		if _, err := tbl.ListRoutes(t.Context(), ""); !errors.Is(err, routes.ErrInvalidRoute) {
			t.Errorf(`ListRoutes("") = %v, want ErrInvalidRoute`, err)
		}
	})
}

// A route is Blackhole only when it is dead (design: Routes); the instance
// check is one call for the whole list.
func TestTableListsDeadRoutesAsBlackhole(t *testing.T) {
	seed := []routes.Entry{
		{Name: "live", Cluster: cluster, DestinationCIDR: "10.244.1.0/24", TargetNode: "node-a"},
		{Name: "live-6", Cluster: cluster, DestinationCIDR: "fd00:10:244:1::/64", TargetNode: "node-a"},
		{Name: "gone", Cluster: cluster, DestinationCIDR: "10.244.2.0/24", TargetNode: "node-b"},
		{Name: "cloud-says-dead", Cluster: cluster, DestinationCIDR: "10.244.3.0/24", TargetNode: "node-c", Blackhole: true},
		{Name: "no-target", Cluster: cluster, DestinationCIDR: "10.244.4.0/24"},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		var mu sync.Mutex
		var asked [][]types.NodeName
		checker := instanceCheckerFunc(func(ctx context.Context, nodes []types.NodeName) ([]types.NodeName, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, nodes)
			return []types.NodeName{"node-b", "node-not-asked"}, nil
		})
		tbl, _, _ := b.make(t, routes.Options{Instances: checker}, seed...)
		got := map[string]bool{}
		for _, r := range mustList(t, tbl) {
			got[r.Name] = r.Blackhole
		}
		want := map[string]bool{"live": false, "live-6": false, "gone": true, "cloud-says-dead": true, "no-target": true}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Blackhole by route name (-want +got):\n%s", diff)
		}
		wantAsked := [][]types.NodeName{{"node-a", "node-b"}}
		if diff := cmp.Diff(wantAsked, asked); diff != "" {
			t.Errorf("InstanceChecker calls (-want +got): want one call with each live target once:\n%s", diff)
		}

		failing := instanceCheckerFunc(func(context.Context, []types.NodeName) ([]types.NodeName, error) {
			return nil, errors.New("cloud API timeout")
		})
		tbl, _, _ = b.make(t, routes.Options{Instances: failing}, seed...)
		if _, err := tbl.ListRoutes(t.Context(), cluster); err == nil || !strings.Contains(err.Error(), "cloud API timeout") {
			t.Errorf("ListRoutes with a failing InstanceChecker = %v, want its error: doubt must not become Blackhole (the controller would delete live routes)", err)
		}
	})
}

// Routes of other clusters and of no cluster are neither listed nor touched.
func TestTableOwnership(t *testing.T) {
	foreign := []routes.Entry{
		{Name: "other", Cluster: "other-cluster", DestinationCIDR: "10.244.1.0/24", TargetNode: "node-a", Extra: "id-1"},
		{Name: "default", DestinationCIDR: "0.0.0.0/0", Extra: "igw-1"},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		tbl, stored, _ := b.make(t, routes.Options{}, foreign...)
		if got := mustList(t, tbl); len(got) != 0 {
			t.Fatalf("ListRoutes(%q) = %+v, want no routes of other clusters", cluster, got)
		}
		mustCreate(t, tbl, uidB, route("node-b", "10.244.2.0/24"))
		for _, r := range []*cloudprovider.Route{{Name: "other", TargetNode: "node-a", DestinationCIDR: "10.244.1.0/24"}, {Name: "default", DestinationCIDR: "0.0.0.0/0"}} {
			if err := tbl.DeleteRoute(t.Context(), cluster, r); err != nil {
				t.Fatalf("DeleteRoute(%q): %v", r.Name, err)
			}
		}
		got := stored()
		if diff := cmp.Diff(foreign, got[:2], cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("foreign routes changed (-want +got):\n%s", diff)
		}
		if len(got) != 3 {
			t.Errorf("driver stores %d routes, want 3 (2 foreign + 1 created)", len(got))
		}
	})
}

func TestTableNodeAddresses(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		tbl, _, _ := b.make(t, routes.Options{EnableNodeAddresses: true})
		r := route("node-a", "10.244.1.0/24")
		r.TargetNodeAddresses = addrs("192.168.0.2", "fd00::2")
		mustCreate(t, tbl, uidA, r)
		r.TargetNodeAddresses[0].Address = "mutated-after-create"
		want := []*cloudprovider.Route{{
			Name: tbl.Namer().Name(uidA, "10.244.1.0/24"), TargetNode: "node-a", DestinationCIDR: "10.244.1.0/24",
			EnableNodeAddresses: true, TargetNodeAddresses: addrs("192.168.0.2", "fd00::2"),
		}}
		if diff := cmp.Diff(want, mustList(t, tbl)); diff != "" {
			t.Errorf("ListRoutes (-want +got): addresses must equal what CreateRoute got, and not alias the caller's slice:\n%s", diff)
		}
	})
}

func TestPerRouteDriverErrors(t *testing.T) {
	boom := errors.New("cloud quota exceeded")
	d := &memRoutes{createErr: boom}
	tbl, err := routes.NewTable(d, routes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.CreateRoute(t.Context(), cluster, uidA, route("node-a", "10.244.1.0/24")); !errors.Is(err, boom) || !strings.Contains(err.Error(), "node-a") {
		t.Errorf("CreateRoute with a failing driver = %v, want it wrapped with the route", err)
	}
	d.createErr, d.deleteErr = nil, boom
	mustCreate(t, tbl, uidA, route("node-a", "10.244.1.0/24"))
	if err := tbl.DeleteRoute(t.Context(), cluster, mustList(t, tbl)[0]); !errors.Is(err, boom) {
		t.Errorf("DeleteRoute with a failing driver = %v, want it wrapped", err)
	}
	d.deleteErr, d.listErr = nil, boom
	if _, err := tbl.ListRoutes(t.Context(), cluster); !errors.Is(err, boom) {
		t.Errorf("ListRoutes with a failing driver = %v, want it wrapped", err)
	}

	// A route without a name (not as listed) is found by listing.
	d.listErr = nil
	if err := tbl.DeleteRoute(t.Context(), cluster, route("node-a", "10.244.1.0/24")); err != nil {
		t.Fatalf("DeleteRoute without a name: %v", err)
	}
	if got := d.snapshot(); len(got) != 0 {
		t.Errorf("after DeleteRoute without a name the driver stores %+v, want nothing", got)
	}
}

func TestConstructorsValidate(t *testing.T) {
	cases := []struct {
		name, reason, wantInMsg string
		make                    func() (*routes.Table, error)
	}{
		{"nil route driver", "a nil driver is misuse, reported not panicked", "routes.NewTable: driver is nil: expected a non-nil routes.RouteDriver", func() (*routes.Table, error) { return routes.NewTable(nil, routes.Options{}) }},
		{"nil table driver", "likewise", "routes.NewWholeTable: driver is nil: expected a non-nil routes.TableDriver", func() (*routes.Table, error) { return routes.NewWholeTable(nil, routes.Options{}) }},
		{"typed nil driver", "a typed nil driver would panic at the first call", "routes.NewTable: driver is a nil *routes_test.memRoutes", func() (*routes.Table, error) {
			return routes.NewTable((*memRoutes)(nil), routes.Options{})
		}},
		{"negative max batch", "a batch needs room: negative is an error, named with the constructor", "routes.NewWholeTable: Options.MaxBatch -1: expected", func() (*routes.Table, error) {
			return routes.NewWholeTable(&memTable{}, routes.Options{MaxBatch: -1})
		}},
		{"name format", "names must fit", "routes.NewTable: Options.Naming.MaxLength 10", func() (*routes.Table, error) {
			return routes.NewTable(&memRoutes{}, routes.Options{Naming: routes.NamerOptions{MaxLength: 10}})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tbl, err := c.make()
			if err == nil || tbl != nil || !strings.Contains(err.Error(), c.wantInMsg) {
				t.Errorf("%s: got (%v, %v), want (nil, error mentioning %q)", c.reason, tbl, err, c.wantInMsg)
			}
		})
	}
}
