package routes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ccmkit/ccmkit/routes"
)

// TestListTTL: with Options.ListTTL, ListRoutes answers from its last
// answer until the TTL has passed or the Table has written, for both
// driver kinds, and its answers are copies.
func TestListTTL(t *testing.T) {
	for _, kind := range []string{"whole table", "per route"} {
		t.Run(kind, func(t *testing.T) {
			clock := clocktesting.NewFakeClock(time.Unix(0, 0))
			checks := 0
			opts := routes.Options{ClusterID: "c1", ListTTL: time.Minute, Clock: clock, BatchWindow: -1,
				Instances: instanceCheckerFunc(func(_ context.Context, _ []types.NodeName) ([]types.NodeName, error) { checks++; return nil, nil })}
			tbl, reads := listTTLTable(t, kind, opts)
			create := func(cidr string) {
				t.Helper()
				if err := tbl.CreateRoute(t.Context(), "", "uid-1", &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: cidr}); err != nil {
					t.Fatal(err)
				}
			}
			list := func() []*cloudprovider.Route {
				t.Helper()
				rs, err := tbl.ListRoutes(t.Context(), "")
				if err != nil {
					t.Fatal(err)
				}
				return rs
			}
			create("10.244.1.0/24")
			before := reads()
			first := list()
			first[0].TargetNode = "changed by the caller"
			if got := list(); len(got) != 1 || got[0].TargetNode != "node-1" {
				t.Errorf("second ListRoutes within the TTL: %+v, want the remembered route to node-1, unchanged by what the caller did to the first answer", got)
			}
			if got := reads() - before; got != 1 || checks != 1 {
				t.Errorf("two ListRoutes within the TTL: %d reads and %d instance checks, want 1 each", got, checks)
			}
			create("10.244.2.0/24")
			if got := list(); len(got) != 2 {
				t.Errorf("ListRoutes after the Table wrote: %d routes, want 2: a write drops the remembered answer", len(got))
			}
			before = reads()
			clock.Step(time.Minute)
			list()
			if got := reads() - before; got != 1 {
				t.Errorf("ListRoutes a TTL later: %d reads, want 1", got)
			}
		})
	}
}

// listTTLTable returns a Table of kind over an in-memory driver and a
// function counting the driver's reads.
func listTTLTable(t *testing.T, kind string, opts routes.Options) (*routes.Table, func() int) {
	t.Helper()
	if kind == "whole table" {
		m := &memTable{}
		tbl, err := routes.NewWholeTable(m, opts)
		if err != nil {
			t.Fatal(err)
		}
		return tbl, func() int { r, _ := m.counts(); return r }
	}
	m := &memRoutes{}
	tbl, err := routes.NewTable(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tbl, func() int { m.mu.Lock(); defer m.mu.Unlock(); return m.lists }
}

// TestListTTLFailedWrite: a write that fails still drops the remembered
// answer: it may have changed the table.
func TestListTTLFailedWrite(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(0, 0))
	m := &memTable{}
	tbl, err := routes.NewWholeTable(m, routes.Options{ClusterID: "c1", ListTTL: time.Minute, Clock: clock, BatchWindow: -1, ConflictRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.ListRoutes(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.writeErr = errors.New("cloud: 500")
	m.mu.Unlock()
	if err := tbl.CreateRoute(t.Context(), "", "uid-1", &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24"}); err == nil {
		t.Fatal("CreateRoute with a failing WriteTable: nil error")
	}
	before, _ := m.counts()
	if _, err := tbl.ListRoutes(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	if after, _ := m.counts(); after-before != 1 {
		t.Errorf("ListRoutes after a failed write: %d reads, want 1", after-before)
	}
}

func TestListTTLNegative(t *testing.T) {
	_, err := routes.NewWholeTable(&memTable{}, routes.Options{ListTTL: -time.Second})
	want := "routes.NewWholeTable: Options.ListTTL -1s: expected 0 (the default, none) or a positive duration"
	if err == nil || err.Error() != want {
		t.Errorf("NewWholeTable with a negative ListTTL: %v, want %q", err, want)
	}
}
