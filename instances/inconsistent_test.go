package instances_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/internal/listcache"
	"github.com/ccmkit/ccmkit/provider"
)

// inconsistentLists reads ccmkit_cloud_inconsistent_answers_total of the
// instances capability's List.
func inconsistentLists(t *testing.T) float64 {
	t.Helper()
	c, err := cloudmetrics.Read()
	if err != nil {
		t.Fatal(err)
	}
	return c.InconsistentOf("instances")["List"]
}

// renamed is instance n listed under another name.
func renamed(n int, name string) instances.Instance {
	i := numbered(n)
	i.Name = name
	return i
}

// checkInconsistent checks that err wraps ErrInconsistent, is never "not
// found", and quotes every one of names.
func checkInconsistent(t *testing.T, what string, err error, names ...string) {
	t.Helper()
	if bad := listcache.CheckInconsistent(err, instances.ErrNotFound, names...); bad != nil {
		t.Errorf("%s: %v", what, bad)
	}
}

// TestCacheInconsistentList checks that a List that lists an ID more than
// once (under two names, with two states, or as an exact copy) is refused
// as a whole: every look-up fails with an error naming the ID and its
// names, nothing is picked, the refusal is counted once and remembered for
// ErrorTTL like a failed List, and once the Driver lists each ID once the
// Cache answers again.
func TestCacheInconsistentList(t *testing.T) {
	for _, tc := range []struct {
		name   string
		listed []instances.Instance
		named  []string // what the error must name
		reason string
	}{
		{
			name:   "one ID under two names",
			listed: []instances.Instance{numbered(0), numbered(1), renamed(1, "node-x"), numbered(2)},
			named:  []string{"i-00001", "node-00001", "node-x"},
			reason: "two Nodes would both match instance i-00001: one of them to another VM",
		},
		{
			name:   "one ID with two states",
			listed: []instances.Instance{numbered(0), numbered(1), numbered(2), withState(numbered(2), instances.StateStopped)},
			named:  []string{"i-00002", "node-00002"},
			reason: "which copy is the cloud's is unknown: the Node would be tainted shut down, or not, by chance",
		},
		{
			name:   "exact copy",
			listed: []instances.Instance{numbered(0), numbered(1), numbered(1), numbered(2)},
			named:  []string{"i-00001", "node-00001"},
			reason: "each ID once, copies included: a Driver over a paged API that repeats items drops them itself",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cloud := numberedCloud(3)
			cloud.setListed(tc.listed)
			const errorTTL = 10 * time.Second
			f := newCacheFixture(t, nil, cloud, instances.CacheOptions{ErrorTTL: errorTTL})
			before := inconsistentLists(t)

			_, err := f.cache.GetByID(t.Context(), provider.ProviderID{ID: "i-00001"})
			checkInconsistent(t, "GetByID", err, tc.named...)
			_, err = f.cache.GetByName(t.Context(), "node-00000")
			checkInconsistent(t, "GetByName of an instance listed once", err, tc.named...)
			_, err = f.cache.List(t.Context())
			checkInconsistent(t, "List", err, tc.named...)
			exists, err := f.adapter.InstanceExists(t.Context(), numberedNode(2))
			if exists || !errors.Is(err, instances.ErrInconsistent) {
				t.Errorf("InstanceExists = (%v, %v), want (false, an ErrInconsistent error): %s", exists, err, tc.reason)
			}
			checkCalls(t, cloud, calls{List: 1}, "the refused List is remembered for ErrorTTL, and nothing is looked up directly")
			if got := inconsistentLists(t) - before; got != 1 {
				t.Errorf("ccmkit_cloud_inconsistent_answers_total{instances, List} grew by %v, want 1 (one List answer refused)", got)
			}

			cloud.setListed(nil) // the Driver is fixed
			f.clock.Advance(errorTTL - time.Nanosecond)
			if _, err := f.cache.GetByID(t.Context(), provider.ProviderID{ID: "i-00001"}); !errors.Is(err, instances.ErrInconsistent) {
				t.Errorf("GetByID within ErrorTTL: error %v, want the remembered ErrInconsistent one", err)
			}
			f.clock.Advance(time.Nanosecond)
			for n := range 3 {
				m, err := f.adapter.InstanceMetadata(t.Context(), numberedNode(n))
				if want := "acme://" + numbered(n).ID; err != nil || m.ProviderID != want {
					t.Errorf("InstanceMetadata(node %d) after ErrorTTL = (%+v, %v), want %s", n, m, err, want)
				}
			}
			checkCalls(t, cloud, calls{List: 2}, "after ErrorTTL the Cache lists again, and answers from that list")
			if got := inconsistentLists(t) - before; got != 1 {
				t.Errorf("ccmkit_cloud_inconsistent_answers_total grew by %v in all, want 1: the consistent List is not counted", got)
			}
		})
	}
}

// TestCacheSharedName checks that a name held by two live instances fails
// only the look-up by that name, with an error naming both IDs and no
// direct call (nothing picked), while look-ups by ID are answered; that
// the List is counted; and that a name held by a live and a terminated
// instance is no conflict.
func TestCacheSharedName(t *testing.T) {
	cloud := numberedCloud(3)
	twin := numbered(1)
	twin.ID = "i-twin"
	cloud.put(twin)
	f := newCacheFixture(t, nil, cloud, instances.CacheOptions{})
	before := inconsistentLists(t)

	_, err := f.cache.GetByName(t.Context(), "node-00001")
	checkInconsistent(t, "GetByName of the shared name", err, "node-00001", "i-00001", "i-twin")
	exists, err := f.adapter.InstanceExists(t.Context(), numberedNode(1)) // by name: no provider ID yet
	if exists || !errors.Is(err, instances.ErrInconsistent) {
		t.Errorf("InstanceExists(node-00001 by name) = (%v, %v), want (false, an ErrInconsistent error): the Node would get one of two VMs' provider ID for good", exists, err)
	}
	for _, id := range []string{"i-00001", "i-twin"} {
		if i, err := f.cache.GetByID(t.Context(), provider.ProviderID{ID: id}); err != nil || i.ID != id {
			t.Errorf("GetByID(%s) = (%+v, %v), want the listed instance: an ID names one instance", id, i, err)
		}
	}
	if m, err := f.adapter.InstanceMetadata(t.Context(), numberedNode(0)); err != nil || m.ProviderID != "acme://i-00000" {
		t.Errorf("InstanceMetadata(node-00000) = (%+v, %v), want acme://i-00000: other names are answered", m, err)
	}
	if all, err := f.cache.List(t.Context()); err != nil || len(all) != 4 {
		t.Errorf("List = (%d instances, %v), want the 4 listed", len(all), err)
	}
	checkCalls(t, cloud, calls{List: 1}, "the list answers every look-up; the shared name is not looked up directly")
	if got := inconsistentLists(t) - before; got != 1 {
		t.Errorf("ccmkit_cloud_inconsistent_answers_total{instances, List} grew by %v, want 1", got)
	}

	// The twin is terminated: the name is the other instance's again.
	cloud.put(withState(twin, instances.StateTerminated))
	f.clock.Advance(time.Minute) // the default TTL
	m, err := f.adapter.InstanceMetadata(t.Context(), numberedNode(1))
	if err != nil || m.ProviderID != "acme://i-00001" {
		t.Errorf("InstanceMetadata(node-00001) after the twin terminated = (%+v, %v), want acme://i-00001", m, err)
	}
	checkCalls(t, cloud, calls{List: 2}, "the next List answers the name")
	if got := inconsistentLists(t) - before; got != 1 {
		t.Errorf("ccmkit_cloud_inconsistent_answers_total grew by %v in all, want 1: a live and a terminated instance sharing a name is no conflict", got)
	}
}
