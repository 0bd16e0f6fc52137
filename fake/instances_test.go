package fake_test

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/provider"
)

func TestInstanceStates(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	v2 := instancesOf(t, c)
	byID := nodes[0]
	byName := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: byID.Name}} // no providerID yet
	type answer struct {
		Exists, Shutdown bool
		ShutdownErr      error
		MetadataErr      error
	}
	tests := []struct {
		name   string
		reason string
		act    func() error
		want   answer
	}{
		{"running", "exists, not shut down", func() error { return nil }, answer{Exists: true}},
		{"stopped", "exists and shut down: the shutdown taint, not a delete", func() error { _, err := c.StopInstance("i-1"); return err },
			answer{Exists: true, Shutdown: true}},
		{"started", "running again", func() error { _, err := c.StartInstance("i-1"); return err }, answer{Exists: true}},
		{"terminated", "gone: (false, nil) deletes the Node", func() error { _, err := c.TerminateInstance("i-1"); return err },
			answer{ShutdownErr: cloudprovider.InstanceNotFound, MetadataErr: cloudprovider.InstanceNotFound}},
		{"removed", "gone from the cloud altogether", func() error { return c.RemoveInstanceContext(t.Context(), "i-1") },
			answer{ShutdownErr: cloudprovider.InstanceNotFound, MetadataErr: cloudprovider.InstanceNotFound}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.act(); err != nil {
				t.Fatal(err)
			}
			for _, node := range []*v1.Node{byID, byName} {
				var got answer
				var err error
				if got.Exists, err = v2.InstanceExists(t.Context(), node); err != nil {
					t.Fatalf("InstanceExists(%q, providerID %q): %v", node.Name, node.Spec.ProviderID, err)
				}
				got.Shutdown, got.ShutdownErr = v2.InstanceShutdown(t.Context(), node)
				meta, merr := v2.InstanceMetadata(t.Context(), node)
				got.MetadataErr = merr
				if merr == nil && meta == nil {
					t.Errorf("InstanceMetadata(%q) = nil, nil; never allowed", node.Name)
				}
				// Sentinels are compared with == by the controllers.
				if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b error) bool { return a == b }), fake.CmpModel); diff != "" { //nolint:errorlint // sentinels must come back unwrapped: the controllers compare them with ==
					t.Errorf("node %q (providerID %q), %s (-want +got):\n%s", node.Name, node.Spec.ProviderID, tt.reason, diff)
				}
			}
		})
	}
	if _, err := c.StartInstance("nope"); !errors.Is(err, fake.ErrInstanceNotFound) {
		t.Errorf("StartInstance(unknown) = %v; want ErrInstanceNotFound", err)
	}
}

func TestInstanceExistsInDoubtIsAnError(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	v2 := instancesOf(t, c)
	if err := c.AddFault(fake.Fault{Times: -1}); err != nil { // an outage
		t.Fatal(err)
	}
	exists, err := v2.InstanceExists(t.Context(), nodes[0])
	if exists || err == nil {
		t.Errorf("InstanceExists during an outage = %v, %v; want false and an error, never (false, nil)", exists, err)
	}
	c.ClearFaults()
	if exists, err := v2.InstanceExists(t.Context(), nodes[0]); !exists || err != nil {
		t.Errorf("InstanceExists after the outage = %v, %v; want true, nil", exists, err)
	}
}

func TestInstanceMetadata(t *testing.T) {
	c := newCloud(t, fake.Config{InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"}},
		fake.Options{Instances: []fake.Instance{{
			Name: "node-a", ID: "i-a", Zone: "eu-1a", Region: "eu-1", Type: "m.large",
			InternalIPs: []string{"fd00:10::5", "10.0.0.9", "10.0.0.5"},
			ExternalIPs: []string{"203.0.113.5"},
			Labels:      map[string]string{"fake.ccmkit.io/rack": "r1"},
		}}})
	v2 := instancesOf(t, c)
	fresh := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	meta, err := v2.InstanceMetadata(t.Context(), fresh)
	if err != nil {
		t.Fatal(err)
	}
	want := &cloudprovider.InstanceMetadata{
		ProviderID: "fake://i-a", InstanceType: "m.large", Zone: "eu-1a", Region: "eu-1",
		NodeAddresses: []v1.NodeAddress{ // canonical order: type, then family, then value
			{Type: v1.NodeInternalIP, Address: "10.0.0.5"},
			{Type: v1.NodeInternalIP, Address: "10.0.0.9"},
			{Type: v1.NodeInternalIP, Address: "fd00:10::5"},
			{Type: v1.NodeExternalIP, Address: "203.0.113.5"},
			{Type: v1.NodeHostName, Address: "node-a"},
		},
		AdditionalLabels: map[string]string{"fake.ccmkit.io/rack": "r1"},
	}
	if diff := cmp.Diff(want, meta, fake.CmpModel); diff != "" {
		t.Errorf("InstanceMetadata (-want +got):\n%s", diff)
	}
	for _, v := range []string{meta.InstanceType, meta.Zone, meta.Region} {
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			t.Errorf("label value %q invalid: %v", v, msgs)
		}
	}

	// With a providerID set, it is returned verbatim.
	withID := fresh.DeepCopy()
	withID.Spec.ProviderID = "fake:///i-a"
	if meta, err := v2.InstanceMetadata(t.Context(), withID); err != nil || meta.ProviderID != withID.Spec.ProviderID {
		t.Errorf("InstanceMetadata(providerID %q) = %+v, %v; want the same providerID", withID.Spec.ProviderID, meta, err)
	}

	// Every IP of the provided-node-ip annotation is present (first).
	pinned := fresh.DeepCopy()
	pinned.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: "10.0.0.9,fd00:10::5"}
	meta, err = v2.InstanceMetadata(t.Context(), pinned)
	if err != nil {
		t.Fatal(err)
	}
	if got := meta.NodeAddresses[:2]; got[0].Address != "10.0.0.9" || got[1].Address != "fd00:10::5" {
		t.Errorf("addresses with provided-node-ip = %v; want 10.0.0.9 and fd00:10::5 first", meta.NodeAddresses)
	}

	// The order is stable across calls.
	again, _ := v2.InstanceMetadata(t.Context(), fresh)
	first, _ := v2.InstanceMetadata(t.Context(), fresh)
	if diff := cmp.Diff(first.NodeAddresses, again.NodeAddresses, fake.CmpModel); diff != "" {
		t.Errorf("addresses changed between calls (-first +again):\n%s", diff)
	}
}

// TestAutoAddressesDualStack: instances without addresses get one of each
// configured family, unique and valid.
func TestAutoAddressesDualStack(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{InstanceCIDRs: []string{"fd00:10::/64", "10.1.0.0/24"}}, 3)
	v2 := instancesOf(t, c)
	seen := map[string]bool{}
	for _, n := range nodes {
		meta, err := v2.InstanceMetadata(t.Context(), n)
		if err != nil {
			t.Fatal(err)
		}
		var v4, v6 int
		for _, a := range meta.NodeAddresses {
			if a.Type != v1.NodeInternalIP {
				continue
			}
			if seen[a.Address] {
				t.Errorf("address %s given twice", a.Address)
			}
			seen[a.Address] = true
			if netip.MustParseAddr(a.Address).Is4() {
				v4++
			} else {
				v6++
			}
		}
		if v4 != 1 || v6 != 1 {
			t.Errorf("node %s: %d IPv4 and %d IPv6 InternalIPs; want one of each", n.Name, v4, v6)
		}
	}
}

// TestInstanceMetadataScales: N nodes asked in one sync cost one list call.
func TestInstanceMetadataScales(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 50)
	v2 := instancesOf(t, c)
	c.ResetCalls()
	for _, n := range nodes {
		if _, err := v2.InstanceMetadata(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	want := fake.Calls{Reads: 1, ByOp: map[fake.Op]int64{fake.OpListInstances: 1}}
	if diff := cmp.Diff(want, c.Calls(), fake.CmpModel); diff != "" {
		t.Errorf("cloud calls for %d InstanceMetadata (-want +got):\n%s", len(nodes), diff)
	}
}

func TestAddInstanceErrors(t *testing.T) {
	c := newCloud(t, fake.Config{InstanceCIDRs: []string{"10.9.0.0/30"}}, fake.Options{Instances: []fake.Instance{{Name: "a", ID: "i-a"}}})
	tests := []struct {
		name   string
		reason string
		in     fake.Instance
		want   error
	}{
		{"no name", "the name is the Node name", fake.Instance{}, fake.ErrInvalidInstance},
		{"taken id", "IDs are unique", fake.Instance{Name: "b", ID: "i-a"}, fake.ErrInstanceExists},
		{"taken ip", "addresses are unique", fake.Instance{Name: "b", InternalIPs: []string{"10.9.0.1"}}, fake.ErrInvalidInstance},
		{"bad zone", "zones are label values", fake.Instance{Name: "b", Zone: "not a label"}, fake.ErrInvalidInstance},
		{"id with slash", "the ID is the last segment of the provider ID", fake.Instance{Name: "b", ID: "i/1"}, fake.ErrInvalidInstance},
		{"id with no-break space", "provider.Codec could not format its provider ID", fake.Instance{Name: "b", ID: "i\u00a01"}, fake.ErrInvalidInstance},
		{"id not utf-8", "provider.Codec could not format its provider ID, and the state file would rewrite it", fake.Instance{Name: "b", ID: "i-\xff"}, fake.ErrInvalidInstance},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.AddInstance(tt.in); !errors.Is(err, tt.want) {
				t.Errorf("AddInstance(%+v) = %v; want %v (%s)", tt.in, err, tt.want, tt.reason)
			}
		})
	}
	// A /30 has two usable addresses; i-a holds one.
	if _, err := c.AddInstance(fake.Instance{Name: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddInstance(fake.Instance{Name: "c"}); !errors.Is(err, fake.ErrPoolExhausted) {
		t.Errorf("AddInstance on a full network = %v; want ErrPoolExhausted", err)
	}
	if got := len(c.Snapshot().Instances); got != 2 {
		t.Errorf("%d instances after failed adds; want 2", got)
	}
}

// TestDuplicateNamesAreAnErrorNotGone: two live instances of one name (a
// cloud allows it, so AddInstance does; seeds may not) make a look-up by
// name an error, never "gone".
func TestDuplicateNamesAreAnErrorNotGone(t *testing.T) {
	c := newCloud(t, fake.Config{}, fake.Options{Instances: []fake.Instance{{Name: "twin"}}})
	if _, err := c.AddInstance(fake.Instance{Name: "twin"}); err != nil {
		t.Fatal(err)
	}
	exists, err := instancesOf(t, c).InstanceExists(t.Context(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "twin"}})
	if exists || err == nil {
		t.Errorf("InstanceExists for an ambiguous name = %v, %v; want an error", exists, err)
	}
	if _, err := c.TerminateInstance("i-2"); err != nil {
		t.Fatal(err)
	}
	if exists, err := instancesOf(t, c).InstanceExists(t.Context(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "twin"}}); !exists || err != nil {
		t.Errorf("InstanceExists with one live twin = %v, %v; want true, nil", exists, err)
	}
}

// TestChangeDuringListIsSeenAtNextLookup: a stop that lands while the
// instance cache is listing is seen by the next look-up, not a TTL later.
func TestChangeDuringListIsSeenAtNextLookup(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	v2 := instancesOf(t, c)
	read, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.SetInterceptor(fake.Funcs{ListInstances: func(ctx context.Context, next instances.ListDriver) ([]instances.Instance, error) {
		out, err := next.List(ctx)
		once.Do(func() { close(read); <-release }) // the first list is slow
		return out, err
	}})
	done := make(chan error)
	go func() {
		_, err := v2.InstanceShutdown(t.Context(), nodes[0])
		done <- err
	}()
	<-read
	if _, err := c.StopInstance("i-1"); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if shut, err := v2.InstanceShutdown(t.Context(), nodes[0]); !shut || err != nil {
		t.Errorf("InstanceShutdown after the stop = %v, %v; want true, nil", shut, err)
	}
}

// TestInstanceAPI: the instance API a test composes its own instances
// layer over is the cloud's, uncached: every call reaches the cloud and is
// counted, and an injected outage fails it.
func TestInstanceAPI(t *testing.T) {
	cloud := newCloud(t, fake.Config{}, fake.Options{Instances: []fake.Instance{{Name: "node-a", ID: "i-a"}}})
	api := cloud.InstanceAPI()
	for range 3 {
		list, err := api.List(t.Context())
		if err != nil || len(list) != 1 || list[0].ID != "i-a" || list[0].Name != "node-a" {
			t.Fatalf("List = %v, %v; want instance i-a named node-a", list, err)
		}
	}
	if _, err := api.GetByID(t.Context(), provider.ProviderID{Scheme: fake.ProviderName, ID: "i-nope"}); !errors.Is(err, instances.ErrNotFound) {
		t.Errorf("GetByID of an unknown instance: %v; want instances.ErrNotFound", err)
	}
	if got := cloud.Calls().ByOp; got[fake.OpListInstances] != 3 || got[fake.OpGetInstance] != 1 {
		t.Errorf("calls by op = %v; want 3 ListInstances and 1 GetInstance: nothing cached", got)
	}
	if err := cloud.AddFault(fake.Fault{Op: fake.OpListInstances, Times: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.List(t.Context()); !errors.Is(err, fake.ErrInjected) {
		t.Errorf("List during an injected fault: %v; want fake.ErrInjected", err)
	}
}
