package instances_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/provider"
)

var acme = provider.Codec{Scheme: "acme"}

// errAny matches any error that is not cloudprovider.InstanceNotFound.
var errAny = errors.New("any error but not-found")

// checkErr reports whether got matches want: nil, errAny, or a sentinel
// (InstanceNotFound must be returned unwrapped: controllers compare with ==).
func checkErr(t *testing.T, what string, got, want error) {
	t.Helper()
	switch want {
	case nil:
		if got != nil {
			t.Errorf("%s: unexpected error %v", what, got)
		}
	case errAny: //nolint:errorlint // want is one of the table's sentinels itself, never wrapped
		if got == nil || errors.Is(got, cloudprovider.InstanceNotFound) {
			t.Errorf("%s: error %v, want an error that is not InstanceNotFound", what, got)
		}
	case cloudprovider.InstanceNotFound:
		if got != cloudprovider.InstanceNotFound { //nolint:errorlint // controllers compare InstanceNotFound with ==: it must come back unwrapped
			t.Errorf("%s: error %v, want cloudprovider.InstanceNotFound unwrapped", what, got)
		}
	default:
		if !errors.Is(got, want) || errors.Is(got, cloudprovider.InstanceNotFound) {
			t.Errorf("%s: error %v, want one wrapping %v and not InstanceNotFound", what, got, want)
		}
	}
}

func nodeWithProviderID(name, pid string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: pid}}
}

func runningInstance() instances.Instance {
	return instances.Instance{
		ID: "i-1", Path: []string{"eu-1"}, Name: "node-1",
		Type: "m1.small", Zone: "eu-1a", Region: "eu-1",
		Addresses: []v1.NodeAddress{external("203.0.113.7"), internal("fd00::1"), hostname("node-1"), internal("10.0.0.1")},
		Labels:    map[string]string{"acme.io/pool": "default"},
	}
}

func wantMetadata(pid string) *cloudprovider.InstanceMetadata {
	return &cloudprovider.InstanceMetadata{
		ProviderID: pid, InstanceType: "m1.small", Zone: "eu-1a", Region: "eu-1",
		NodeAddresses:    []v1.NodeAddress{internal("10.0.0.1"), internal("fd00::1"), external("203.0.113.7"), hostname("node-1")},
		AdditionalLabels: map[string]string{"acme.io/pool": "default"},
	}
}

func withState(i instances.Instance, s instances.State) instances.Instance {
	i.State = s
	return i
}

// TestAdapterContract checks the InstancesV2 answers for every look-up
// outcome, through all three methods.
func TestAdapterContract(t *testing.T) {
	timeout := context.DeadlineExceeded
	tests := []struct {
		name   string
		reason string
		driver instances.Driver
		node   *v1.Node

		exists       bool
		existsErr    error
		shutdown     bool
		shutdownErr  error
		meta         *cloudprovider.InstanceMetadata
		metaErr      error
		byID, byName int64 // expected driver calls for the three methods together
	}{
		{
			name: "running by provider ID", reason: "exists, not shut down, full metadata with spec.providerID",
			driver: newMemCloud(runningInstance()), node: nodeWithProviderID("node-1", "acme://eu-1/i-1"),
			exists: true, meta: wantMetadata("acme://eu-1/i-1"), byID: 3,
		},
		{
			name: "running by name", reason: "no spec.providerID: look up by node name and format the provider ID with the codec",
			driver: newMemCloud(runningInstance()), node: nodeWithProviderID("node-1", ""),
			exists: true, meta: wantMetadata("acme://eu-1/i-1"), byName: 3,
		},
		{
			name: "provider ID in another spelling is returned verbatim", reason: "metadata.ProviderID must equal spec.providerID when set",
			driver: newMemCloud(runningInstance()), node: nodeWithProviderID("node-1", "acme:///eu-1/i-1"),
			exists: true, meta: wantMetadata("acme:///eu-1/i-1"), byID: 3,
		},
		{
			name: "provider ID without the path is returned verbatim", reason: "the path is not identity; spec.providerID is immutable",
			driver: newMemCloud(runningInstance()), node: nodeWithProviderID("node-1", "acme://i-1"),
			exists: true, meta: wantMetadata("acme://i-1"), byID: 3,
		},
		{
			name: "stopped", reason: "a stopped instance exists and is shut down (shutdown taint, no deletion)",
			driver: newMemCloud(withState(runningInstance(), instances.StateStopped)), node: nodeWithProviderID("node-1", "acme://eu-1/i-1"),
			exists: true, shutdown: true, meta: wantMetadata("acme://eu-1/i-1"), byID: 3,
		},
		{
			name: "terminated", reason: "a terminated instance is gone: (false, nil) deletes the Node",
			driver: newMemCloud(withState(runningInstance(), instances.StateTerminated)), node: nodeWithProviderID("node-1", "acme://eu-1/i-1"),
			shutdownErr: cloudprovider.InstanceNotFound, metaErr: cloudprovider.InstanceNotFound, byID: 3,
		},
		{
			name: "terminated by name", reason: "a terminated instance is gone by name too",
			driver: returns(withState(runningInstance(), instances.StateTerminated), nil), node: nodeWithProviderID("node-1", ""),
			shutdownErr: cloudprovider.InstanceNotFound, metaErr: cloudprovider.InstanceNotFound, byName: 3,
		},
		{
			name: "not found by provider ID", reason: "a definite not-found (wrapped sentinel) is gone",
			driver: newMemCloud(), node: nodeWithProviderID("node-1", "acme://eu-1/i-1"),
			shutdownErr: cloudprovider.InstanceNotFound, metaErr: cloudprovider.InstanceNotFound, byID: 3,
		},
		{
			name: "not found by name", reason: "a definite not-found by name is gone",
			driver: newMemCloud(), node: nodeWithProviderID("node-1", ""),
			shutdownErr: cloudprovider.InstanceNotFound, metaErr: cloudprovider.InstanceNotFound, byName: 3,
		},
		{
			name: "ErrNotFound unwrapped", reason: "either spelling of the sentinel counts",
			driver: returns(instances.Instance{}, instances.ErrNotFound), node: nodeWithProviderID("node-1", "acme://i-1"),
			shutdownErr: cloudprovider.InstanceNotFound, metaErr: cloudprovider.InstanceNotFound, byID: 3,
		},
		{
			name: "provider ID set: the name is never consulted", reason: "provider ID first; a live instance with the node's name does not make a deleted ID exist",
			driver: newMemCloud(runningInstance()), node: nodeWithProviderID("node-1", "acme://eu-1/i-gone"),
			shutdownErr: cloudprovider.InstanceNotFound, metaErr: cloudprovider.InstanceNotFound, byID: 3,
		},
		{
			name: "driver error", reason: "any failure is (false, err), never gone",
			driver: returns(instances.Instance{}, timeout), node: nodeWithProviderID("node-1", "acme://i-1"),
			existsErr: timeout, shutdownErr: timeout, metaErr: timeout, byID: 3,
		},
		{
			name: "driver error by name", reason: "any failure is (false, err), never gone",
			driver: returns(instances.Instance{}, errors.New("HTTP 503")), node: nodeWithProviderID("node-1", ""),
			existsErr: errAny, shutdownErr: errAny, metaErr: errAny, byName: 3,
		},
		{
			name: "foreign scheme", reason: "a node of another provider is an error, not gone; the driver is not asked",
			driver: newMemCloud(), node: nodeWithProviderID("node-1", "aws:///eu-west-1a/i-1"),
			existsErr: provider.ErrForeignProviderID, shutdownErr: provider.ErrForeignProviderID, metaErr: provider.ErrForeignProviderID,
		},
		{
			name: "malformed provider ID", reason: "an error naming the field, not gone",
			driver: newMemCloud(), node: nodeWithProviderID("node-1", "acme://eu-1//i-1"),
			existsErr: provider.ErrMalformedProviderID, shutdownErr: provider.ErrMalformedProviderID, metaErr: provider.ErrMalformedProviderID,
		},
		{
			name: "provider ID without an instance ID", reason: "an error, not gone",
			driver: newMemCloud(), node: nodeWithProviderID("node-1", "acme://"),
			existsErr: provider.ErrEmptyProviderID, shutdownErr: provider.ErrEmptyProviderID, metaErr: provider.ErrEmptyProviderID,
		},
		{
			name: "driver returns another ID", reason: "a driver bug is an error, never an answer about the wrong instance",
			driver: returns(instances.Instance{ID: "i-2", Name: "node-1", Addresses: []v1.NodeAddress{internal("10.0.0.1")}}, nil), node: nodeWithProviderID("node-1", "acme://i-1"),
			existsErr: instances.ErrInvalidInstance, shutdownErr: instances.ErrInvalidInstance, metaErr: instances.ErrInvalidInstance, byID: 3,
		},
		{
			name: "driver returns another name", reason: "a driver bug is an error",
			driver: returns(instances.Instance{ID: "i-2", Name: "node-2", Addresses: []v1.NodeAddress{internal("10.0.0.1")}}, nil), node: nodeWithProviderID("node-1", ""),
			existsErr: instances.ErrInvalidInstance, shutdownErr: instances.ErrInvalidInstance, metaErr: instances.ErrInvalidInstance, byName: 3,
		},
		{
			name: "driver returns an empty ID by name", reason: "no provider ID can be made from it",
			driver: returns(instances.Instance{Name: "node-1", Addresses: []v1.NodeAddress{internal("10.0.0.1")}}, nil), node: nodeWithProviderID("node-1", ""),
			existsErr: instances.ErrInvalidInstance, shutdownErr: instances.ErrInvalidInstance, metaErr: instances.ErrInvalidInstance, byName: 3,
		},
		{
			name: "unknown state", reason: "an unknown state is doubt, not gone",
			driver: returns(withState(runningInstance(), instances.State(7)), nil), node: nodeWithProviderID("node-1", "acme://i-1"),
			existsErr: instances.ErrInvalidInstance, shutdownErr: instances.ErrInvalidInstance, metaErr: instances.ErrInvalidInstance, byID: 3,
		},
		{
			name: "node without provider ID or name", reason: "nothing to look up by",
			driver: newMemCloud(runningInstance()), node: nodeWithProviderID("", ""),
			existsErr: errAny, shutdownErr: errAny, metaErr: errAny,
		},
		{
			name: "nil node", reason: "an error, never a panic",
			driver: newMemCloud(runningInstance()), node: nil,
			existsErr: errAny, shutdownErr: errAny, metaErr: errAny,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := instances.NewAdapter(tt.driver, acme, instances.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var before *v1.Node
			if tt.node != nil {
				before = tt.node.DeepCopy()
			}
			ctx := t.Context()

			exists, err := a.InstanceExists(ctx, tt.node)
			checkErr(t, "InstanceExists", err, tt.existsErr)
			if exists != tt.exists {
				t.Errorf("InstanceExists = %v, want %v (%s)", exists, tt.exists, tt.reason)
			}
			if !exists && err == nil && tt.meta != nil {
				t.Errorf("InstanceExists = (false, nil) for a live instance: the Node would be deleted")
			}

			shutdown, err := a.InstanceShutdown(ctx, tt.node)
			checkErr(t, "InstanceShutdown", err, tt.shutdownErr)
			if shutdown != tt.shutdown {
				t.Errorf("InstanceShutdown = %v, want %v (%s)", shutdown, tt.shutdown, tt.reason)
			}

			meta, err := a.InstanceMetadata(ctx, tt.node)
			checkErr(t, "InstanceMetadata", err, tt.metaErr)
			if meta == nil && err == nil {
				t.Errorf("InstanceMetadata = (nil, nil)")
			}
			if diff := cmp.Diff(tt.meta, meta); diff != "" {
				t.Errorf("InstanceMetadata (-want +got):\n%s\n(%s)", diff, tt.reason)
			}

			if tt.node != nil {
				if diff := cmp.Diff(before, tt.node); diff != "" {
					t.Errorf("the Node argument was modified (-before +after):\n%s", diff)
				}
			}
			if c, ok := tt.driver.(*memCloud); ok {
				if got := c.getByID.Load(); got != tt.byID {
					t.Errorf("GetByID called %d times, want %d", got, tt.byID)
				}
				if got := c.getByName.Load(); got != tt.byName {
					t.Errorf("GetByName called %d times, want %d", got, tt.byName)
				}
			}
		})
	}
}

// TestAdapterContextCanceled checks that a canceled context is an error,
// not a deleted Node.
func TestAdapterContextCanceled(t *testing.T) {
	a, err := instances.NewAdapter(newMemCloud(runningInstance()), acme, instances.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	exists, err := a.InstanceExists(ctx, nodeWithProviderID("node-1", "acme://eu-1/i-1"))
	if exists || !errors.Is(err, context.Canceled) {
		t.Errorf("InstanceExists on a canceled context = (%v, %v), want (false, context.Canceled)", exists, err)
	}
}

// TestAdapterMetadataValidation checks what the Adapter refuses to pass on
// to the node controller.
func TestAdapterMetadataValidation(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		modify func(*instances.Instance)
		node   *v1.Node
		opts   instances.AddressPolicy
		want   *cloudprovider.InstanceMetadata // when no error
		err    []error                         // all must match
		msg    string                          // substring of the error
	}{
		{
			name: "label in kubernetes.io", reason: "the node controller discards it; we report it",
			modify: func(i *instances.Instance) { i.Labels["kubernetes.io/role"] = "x" },
			err:    []error{instances.ErrInvalidInstance}, msg: `label key "kubernetes.io/role"`,
		},
		{
			name: "label in a kubernetes.io subdomain", reason: "node.kubernetes.io/ is discarded too",
			modify: func(i *instances.Instance) { i.Labels["node.kubernetes.io/instance-type"] = "x" },
			err:    []error{instances.ErrInvalidInstance}, msg: `node.kubernetes.io/instance-type`,
		},
		{
			name: "label in a k8s.io subdomain", reason: "the k8s.io namespace is discarded",
			modify: func(i *instances.Instance) { i.Labels["foo.k8s.io/x"] = "y" },
			err:    []error{instances.ErrInvalidInstance}, msg: `foo.k8s.io/x`,
		},
		{
			name: "label key merely containing kubernetes.io is fine", reason: "the upstream expression needs a dot or the start before it",
			modify: func(i *instances.Instance) { i.Labels["mykubernetes.io/x"] = "y" },
			want: func() *cloudprovider.InstanceMetadata {
				m := wantMetadata("acme://eu-1/i-1")
				m.AdditionalLabels["mykubernetes.io/x"] = "y"
				return m
			}(),
		},
		{
			name: "label key not a qualified name", reason: "the API server would reject the Node update",
			modify: func(i *instances.Instance) { i.Labels["acme.io/has space"] = "y" },
			err:    []error{instances.ErrInvalidInstance}, msg: "qualified name",
		},
		{
			name: "label value invalid", reason: "the API server would reject the Node update",
			modify: func(i *instances.Instance) { i.Labels["acme.io/pool"] = "not valid!" },
			err:    []error{instances.ErrInvalidInstance}, msg: `value "not valid!"`,
		},
		{
			name: "instance type invalid", reason: "it becomes a label value",
			modify: func(i *instances.Instance) { i.Type = "m1 small" },
			err:    []error{instances.ErrInvalidInstance}, msg: `Type "m1 small"`,
		},
		{
			name: "zone too long", reason: "label values are at most 63 characters",
			modify: func(i *instances.Instance) { i.Zone = strings.Repeat("z", 64) },
			err:    []error{instances.ErrInvalidInstance}, msg: "Zone",
		},
		{
			name: "region invalid", reason: "it becomes a label value",
			modify: func(i *instances.Instance) { i.Region = "-eu" },
			err:    []error{instances.ErrInvalidInstance}, msg: `Region "-eu"`,
		},
		{
			name: "empty type, zone, region and labels", reason: "all optional; the controller skips empty values",
			modify: func(i *instances.Instance) { i.Type, i.Zone, i.Region, i.Labels = "", "", "", nil },
			want: &cloudprovider.InstanceMetadata{
				ProviderID:    "acme://eu-1/i-1",
				NodeAddresses: wantMetadata("").NodeAddresses,
			},
		},
		{
			name: "invalid address", reason: "reported as a driver bug with the address error",
			modify: func(i *instances.Instance) { i.Addresses = append(i.Addresses, internal("10.0.0.256")) },
			err:    []error{instances.ErrInvalidInstance, instances.ErrInvalidAddress}, msg: "10.0.0.256",
		},
		{
			name: "no InternalIP", reason: "the contract needs one",
			modify: func(i *instances.Instance) { i.Addresses = []v1.NodeAddress{external("203.0.113.7")} },
			err:    []error{instances.ErrInvalidInstance, instances.ErrNoInternalIP},
		},
		{
			name: "dual-stack required", reason: "Options.Addresses applies to every instance",
			modify: func(i *instances.Instance) { i.Addresses = []v1.NodeAddress{internal("10.0.0.1")} },
			opts:   instances.AddressPolicy{RequireDualStack: true},
			err:    []error{instances.ErrInvalidInstance, instances.ErrNoInternalIP}, msg: "IPv6",
		},
		{
			name: "PreferIPv6", reason: "Options.Addresses applies to every instance",
			opts: instances.AddressPolicy{PreferIPv6: true},
			want: func() *cloudprovider.InstanceMetadata {
				m := wantMetadata("acme://eu-1/i-1")
				m.NodeAddresses = []v1.NodeAddress{internal("fd00::1"), internal("10.0.0.1"), external("203.0.113.7"), hostname("node-1")}
				return m
			}(),
		},
		{
			name: "provided node IP applied", reason: "the returned list is what the node controller will write",
			node: annotated(nodeWithProviderID("node-1", "acme://eu-1/i-1"), "fd00::1"),
			want: func() *cloudprovider.InstanceMetadata {
				m := wantMetadata("acme://eu-1/i-1")
				m.NodeAddresses = []v1.NodeAddress{internal("fd00::1"), external("203.0.113.7"), hostname("node-1")}
				return m
			}(),
		},
		{
			name: "provided node IP not among the addresses", reason: "the node controller would refuse the Node; not a driver bug",
			node: annotated(nodeWithProviderID("node-1", "acme://eu-1/i-1"), "10.9.9.9"),
			err:  []error{instances.ErrProvidedNodeIP}, msg: "10.9.9.9",
		},
		{
			name: "provided node IP present but empty", reason: "upstream fails to parse an empty annotation",
			node: annotated(nodeWithProviderID("node-1", "acme://eu-1/i-1"), ""),
			err:  []error{instances.ErrProvidedNodeIP},
		},
		{
			name: "path cannot be formatted", reason: "the provider ID for a Node without one must parse back",
			modify: func(i *instances.Instance) { i.Path = []string{"eu 1"} },
			node:   nodeWithProviderID("node-1", ""),
			err:    []error{instances.ErrInvalidInstance}, msg: "provider ID",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst := runningInstance()
			if tt.modify != nil {
				tt.modify(&inst)
			}
			node := tt.node
			if node == nil {
				node = nodeWithProviderID("node-1", "acme://eu-1/i-1")
			}
			a, err := instances.NewAdapter(newMemCloud(inst), acme, instances.Options{Addresses: tt.opts})
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.InstanceMetadata(t.Context(), node)
			for _, want := range tt.err {
				if !errors.Is(err, want) {
					t.Errorf("error %v, want one wrapping %v (%s)", err, want, tt.reason)
				}
			}
			if len(tt.err) == 0 && err != nil {
				t.Errorf("unexpected error %v (%s)", err, tt.reason)
			}
			if errors.Is(err, cloudprovider.InstanceNotFound) {
				t.Errorf("error %v matches InstanceNotFound", err)
			}
			if tt.msg != "" && (err == nil || !strings.Contains(err.Error(), tt.msg)) {
				t.Errorf("error %v does not mention %q", err, tt.msg)
			}
			if err != nil && !strings.Contains(err.Error(), `node "node-1"`) {
				t.Errorf("error %v does not name the node", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("InstanceMetadata (-want +got):\n%s", diff)
			}
		})
	}
}

func annotated(n *v1.Node, providedIP string) *v1.Node {
	n.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: providedIP}
	return n
}

// TestAdapterMetadataIsACopy checks that changing returned metadata does not
// change the driver's instance.
func TestAdapterMetadataIsACopy(t *testing.T) {
	cloud := newMemCloud(runningInstance())
	a, err := instances.NewAdapter(cloud, acme, instances.Options{})
	if err != nil {
		t.Fatal(err)
	}
	node := nodeWithProviderID("node-1", "acme://eu-1/i-1")
	m, err := a.InstanceMetadata(t.Context(), node)
	if err != nil {
		t.Fatal(err)
	}
	m.AdditionalLabels["acme.io/pool"] = "changed"
	m.NodeAddresses[0].Address = "changed"
	m2, err := a.InstanceMetadata(t.Context(), node)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantMetadata("acme://eu-1/i-1"), m2); diff != "" {
		t.Errorf("second InstanceMetadata (-want +got):\n%s", diff)
	}
}

func TestNewAdapterErrors(t *testing.T) {
	var typedNil *memCloud
	tests := []struct {
		name   string
		reason string
		driver instances.Driver
		codec  provider.Codec
		opts   instances.Options
		msg    string
	}{
		{name: "nil driver", reason: "nothing to adapt", codec: acme, msg: "instances.NewAdapter: driver is nil: expected a non-nil instances.Driver"},
		{name: "typed nil driver", reason: "a nil *T in the interface would panic at the first look-up", driver: typedNil, codec: acme, msg: "instances.NewAdapter: driver is a nil *instances_test.memCloud: expected a non-nil instances.Driver"},
		{name: "empty scheme", reason: "provider IDs need the provider name", driver: newMemCloud(), msg: "instances.NewAdapter: codec.Scheme is empty: expected the provider name"},
		{name: "bad scheme", reason: "the codec rejects it", driver: newMemCloud(), codec: provider.Codec{Scheme: "ac me"}, msg: `instances.NewAdapter: codec.Scheme "ac me": `},
		{name: "fixed provided node IP", reason: "it comes from each Node", driver: newMemCloud(), codec: acme, opts: instances.Options{Addresses: instances.AddressPolicy{ProvidedNodeIP: "10.0.0.1"}}, msg: `instances.NewAdapter: Options.Addresses.ProvidedNodeIP "10.0.0.1": expected empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := instances.NewAdapter(tt.driver, tt.codec, tt.opts)
			if a != nil || err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("NewAdapter = (%v, %v): expected nil and an error containing %q (%s)", a, err, tt.msg, tt.reason)
			}
		})
	}
}
