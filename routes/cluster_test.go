package routes_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/routes"
)

// twoClusters returns two Tables with ClusterID "a" and "b" over one driver
// of the given kind, and a function listing what that driver stores.
func twoClusters(t *testing.T, kind string, c routes.Options) (a, b *routes.Table, stored func() []routes.Entry) {
	t.Helper()
	switch kind {
	case "per-route":
		d := &memRoutes{}
		a, b, stored = mustTable(routes.NewTable(d, withID(c, "a")))(t), mustTable(routes.NewTable(d, withID(c, "b")))(t), d.snapshot
	case "whole-table":
		d := &memTable{}
		a, b, stored = mustTable(routes.NewWholeTable(d, withID(c, "a")))(t), mustTable(routes.NewWholeTable(d, withID(c, "b")))(t), d.snapshot
	default:
		t.Fatalf("unknown driver kind %q", kind)
	}
	return a, b, stored
}

func withID(c routes.Options, id string) routes.Options {
	c.ClusterID = id
	return c
}

func mustTable(tbl *routes.Table, err error) func(*testing.T) *routes.Table {
	return func(t *testing.T) *routes.Table {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	}
}

// nodesOf returns the name hints (node UIDs, distinct per cluster) and
// routes of n dual-stack nodes of cluster c; both clusters call their nodes
// node-0, node-1, ...
func nodesOf(c string, n, cidrOctet int) (hints []string, rs []*cloudprovider.Route) {
	for i := range n {
		hint := fmt.Sprintf("%s-uid-%d", c, i)
		node := types.NodeName(fmt.Sprintf("node-%d", i))
		hints = append(hints, hint, hint)
		rs = append(rs,
			&cloudprovider.Route{TargetNode: node, DestinationCIDR: fmt.Sprintf("10.%d.%d.0/24", cidrOctet, i)},
			&cloudprovider.Route{TargetNode: node, DestinationCIDR: fmt.Sprintf("fd00:%x:%x::/64", cidrOctet, i)})
	}
	return hints, rs
}

// TestClusterIDIsolatesClusters is the two-clusters-on-one-network test:
// both CCMs run with --cluster-name "kubernetes" (the default), each Table
// has its own Options.ClusterID, and neither lists, replaces nor deletes the
// other's routes, over either driver kind.
func TestClusterIDIsolatesClusters(t *testing.T) {
	const clusterName = "kubernetes"
	for _, kind := range []string{"per-route", "whole-table"} {
		t.Run(kind, func(t *testing.T) {
			a, b, stored := twoClusters(t, kind, routes.Options{EnableNodeAddresses: true, BatchWindow: -1})
			hintsA, rsA := nodesOf("a", 3, 1)
			hintsB, rsB := nodesOf("b", 3, 2)
			for i := range rsA {
				if err := a.CreateRoute(t.Context(), clusterName, hintsA[i], rsA[i]); err != nil {
					t.Fatalf("cluster a: CreateRoute: %v", err)
				}
				if err := b.CreateRoute(t.Context(), clusterName, hintsB[i], rsB[i]); err != nil {
					t.Fatalf("cluster b: CreateRoute: %v", err)
				}
			}

			// Ownership and names: each route is tagged with its Table's
			// ClusterID, never with the shared clusterName, and every name
			// is unique on the shared network.
			owners := map[string]int{}
			names := map[string]bool{}
			for _, e := range stored() {
				owners[e.Cluster]++
				if names[e.Name] {
					t.Errorf("route name %q is stored twice on the shared network", e.Name)
				}
				names[e.Name] = true
			}
			if diff := cmp.Diff(map[string]int{"a": 6, "b": 6}, owners); diff != "" {
				t.Errorf("stored routes per Entry.Cluster (-want +got):\n%s", diff)
			}

			// Listing: each sees exactly its own routes.
			listedA, err := a.ListRoutes(t.Context(), clusterName)
			if err != nil {
				t.Fatal(err)
			}
			listedB, err := b.ListRoutes(t.Context(), clusterName)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(ids(a, hintsA, rsA), listedIDs(listedA), sortIDs); diff != "" {
				t.Errorf("cluster a lists (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ids(b, hintsB, rsB), listedIDs(listedB), sortIDs); diff != "" {
				t.Errorf("cluster b lists (-want +got):\n%s", diff)
			}

			// Deleting: a deletes every route b listed, and then its own.
			for _, r := range listedB {
				if err := a.DeleteRoute(t.Context(), clusterName, r); err != nil {
					t.Fatalf("cluster a deleting b's route %q: %v, want nil (nothing of a's to delete)", r.Name, err)
				}
				unnamed := *r
				unnamed.Name = ""
				if err := a.DeleteRoute(t.Context(), clusterName, &unnamed); err != nil {
					t.Fatalf("cluster a deleting b's route %s without a name: %v", r.DestinationCIDR, err)
				}
			}
			if got := countOwned(stored(), "b"); got != 6 {
				t.Errorf("after cluster a deleted b's listed routes, b owns %d routes, want 6", got)
			}

			// Replacing: a re-creates its node-0 route with new addresses
			// (a replacement under EnableNodeAddresses); b's node-0 routes,
			// same node name, stay as they were.
			beforeB := ownedBy(stored(), "b")
			r := *rsA[0]
			r.TargetNodeAddresses = addrs("192.0.2.10")
			if err := a.CreateRoute(t.Context(), clusterName, hintsA[0], &r); err != nil {
				t.Fatalf("cluster a replacing its route: %v", err)
			}
			if diff := cmp.Diff(beforeB, ownedBy(stored(), "b"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("cluster b's routes changed when a replaced its own (-before +after):\n%s", diff)
			}

			for _, r := range listedA {
				if err := a.DeleteRoute(t.Context(), clusterName, r); err != nil {
					t.Fatalf("cluster a deleting its own route %q: %v", r.Name, err)
				}
			}
			if got := countOwned(stored(), "a"); got != 0 {
				t.Errorf("cluster a still owns %d routes after deleting every route it listed", got)
			}
			if diff := cmp.Diff(beforeB, ownedBy(stored(), "b"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("cluster b's routes changed when a deleted its own (-before +after):\n%s", diff)
			}

			// A Table without ClusterID, called with the shared name, owns
			// none of them.
			var plain *routes.Table
			switch kind {
			case "per-route":
				plain = mustTable(routes.NewTable(&memRoutes{entries: stored()}, routes.Options{}))(t)
			default:
				plain = mustTable(routes.NewWholeTable(&memTable{entries: stored()}, routes.Options{}))(t)
			}
			if got, err := plain.ListRoutes(t.Context(), clusterName); err != nil || len(got) != 0 {
				t.Errorf("a Table without ClusterID lists %d routes (err %v) owned by ClusterIDs, want 0", len(got), err)
			}
		})
	}
}

// TestClusterIDReplacesClusterName checks that Options.ClusterID is the
// identity whatever clusterName the calls bring, empty included.
func TestClusterIDReplacesClusterName(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		tbl, stored, _ := b.make(t, routes.Options{ClusterID: "prod-eu"})
		for _, name := range []string{"kubernetes", ""} {
			if err := tbl.CreateRoute(t.Context(), name, uidA, route("node-a", "10.244.1.0/24")); err != nil {
				t.Fatalf("CreateRoute with clusterName %q: %v", name, err)
			}
			listed, err := tbl.ListRoutes(t.Context(), name)
			if err != nil || len(listed) != 1 {
				t.Fatalf("ListRoutes with clusterName %q = %d routes, %v; want the one route", name, len(listed), err)
			}
		}
		if diff := cmp.Diff([]string{"prod-eu"}, clustersOf(stored())); diff != "" {
			t.Errorf("Entry.Cluster of stored routes (-want +got):\n%s", diff)
		}
		listed := mustList(t, tbl)
		if err := tbl.DeleteRoute(t.Context(), "", listed[0]); err != nil {
			t.Fatalf("DeleteRoute with an empty clusterName: %v", err)
		}
		if got := stored(); len(got) != 0 {
			t.Errorf("after DeleteRoute the driver stores %+v, want nothing", got)
		}
	})
}

func TestNewTableClusterID(t *testing.T) {
	tests := []struct {
		name, reason, id string
		wantErr          bool
	}{
		{name: "unset", reason: "empty means each call's clusterName", id: ""},
		{name: "set", reason: "any identity without surrounding white space", id: "prod-eu-1"},
		{name: "leading space", reason: "a stray space from a config file would silently be another owner", id: " prod", wantErr: true},
		{name: "trailing newline", reason: "a value read from a file with its newline would silently be another owner", id: "prod\n", wantErr: true},
		{name: "only space", reason: "white space is no identity", id: "  ", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for kind, build := range map[string]func() (*routes.Table, error){
				"per-route": func() (*routes.Table, error) { return routes.NewTable(&memRoutes{}, routes.Options{ClusterID: tt.id}) },
				"whole-table": func() (*routes.Table, error) {
					return routes.NewWholeTable(&memTable{}, routes.Options{ClusterID: tt.id})
				},
			} {
				tbl, err := build()
				if (err != nil) != tt.wantErr {
					t.Fatalf("%s: error %v, want error: %v (%s)", kind, err, tt.wantErr, tt.reason)
				}
				if err != nil && (tbl != nil || !strings.Contains(err.Error(), "Options.ClusterID") || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.id))) {
					t.Errorf("%s: (%v, %v), want no Table and an error naming Options.ClusterID and %q", kind, tbl, err, tt.id)
				}
			}
		})
	}
}

func listedIDs(rs []*cloudprovider.Route) []routeID {
	var out []routeID
	for _, r := range rs {
		out = append(out, routeID{r.Name, r.DestinationCIDR, r.TargetNode})
	}
	return out
}

func ownedBy(entries []routes.Entry, c string) []routes.Entry {
	var out []routes.Entry
	for _, e := range entries {
		if e.Cluster == c {
			out = append(out, e)
		}
	}
	return out
}

func countOwned(entries []routes.Entry, c string) int { return len(ownedBy(entries, c)) }

func clustersOf(entries []routes.Entry) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range entries {
		if !seen[e.Cluster] {
			seen[e.Cluster] = true
			out = append(out, e.Cluster)
		}
	}
	return out
}
