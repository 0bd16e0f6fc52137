package provider

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"
	fakecloud "k8s.io/cloud-provider/fake"

	"github.com/ccmkit/ccmkit/internal/check"
)

func TestAccessorTruthTable(t *testing.T) {
	full := &fakecloud.Cloud{}
	var nilFake *fakecloud.Cloud // typed nil

	tests := []struct {
		name   string
		reason string
		opts   Options
		want   map[string]bool
	}{
		{
			name:   "empty",
			reason: "no capability: every accessor is (nil,false)",
			want:   map[string]bool{},
		},
		{
			name:   "all",
			reason: "every capability set: every accessor is (impl,true)",
			opts:   Options{LoadBalancer: full, InstancesV2: full, Instances: full, Zones: full, Clusters: full, Routes: full},
			want:   map[string]bool{"lb": true, "v2": true, "v1": true, "zones": true, "clusters": true, "routes": true},
		},
		{
			name:   "typed nil",
			reason: "a nil *T in the interface is absent; (nil,true) panics the node-lifecycle controller",
			opts:   Options{LoadBalancer: nilFake, InstancesV2: nilFake, Instances: nilFake, Zones: nilFake, Clusters: nilFake, Routes: nilFake},
			want:   map[string]bool{},
		},
		{
			name:   "mixed",
			reason: "only the present capabilities are reported",
			opts:   Options{LoadBalancer: full, InstancesV2: nilFake, Routes: full},
			want:   map[string]bool{"lb": true, "routes": true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := mustNew(t, "test", tc.opts)
			expect := func(key string, v any, ok bool) {
				t.Helper()
				if ok != tc.want[key] {
					t.Errorf("%s: ok = %v, want %v (%s)", key, ok, tc.want[key], tc.reason)
				}
				if ok == check.IsNil(v) {
					t.Errorf("%s: returned (%#v, %v): value and bool disagree (%s)", key, v, ok, tc.reason)
				}
				if !ok && v != nil {
					t.Errorf("%s: returned a non-nil interface %#v with false", key, v)
				}
			}
			lb, ok := c.LoadBalancer()
			expect("lb", lb, ok)
			v2, ok := c.InstancesV2()
			expect("v2", v2, ok)
			v1, ok := c.Instances()
			expect("v1", v1, ok)
			z, ok := c.Zones()
			expect("zones", z, ok)
			cl, ok := c.Clusters()
			expect("clusters", cl, ok)
			r, ok := c.Routes()
			expect("routes", r, ok)
		})
	}
}

func TestProviderNameAndClusterID(t *testing.T) {
	if c := mustNew(t, "acme", Options{}); c.ProviderName() != "acme" || c.HasClusterID() {
		t.Errorf("New(acme, Options{}): ProviderName=%q HasClusterID=%v: expected acme false", c.ProviderName(), c.HasClusterID())
	}
	if c := mustNew(t, "acme", Options{ClusterID: "prod-1"}); !c.HasClusterID() {
		t.Errorf("New(acme, Options{ClusterID: prod-1}): HasClusterID=false: expected true")
	}
}

// worker is a capability that starts a goroutine in Initialize and stops it
// when its context ends.
type worker struct {
	fakecloud.Cloud
	inits    atomic.Int32
	stopped  chan struct{}
	builder  cloudprovider.ControllerClientBuilder
	informer informers.SharedInformerFactory
}

func (w *worker) Initialize(ctx context.Context, cb cloudprovider.ControllerClientBuilder) {
	w.inits.Add(1)
	w.builder = cb
	go func() {
		<-ctx.Done()
		close(w.stopped)
	}()
}

func (w *worker) SetInformers(f informers.SharedInformerFactory) { w.informer = f }

type builder struct {
	cloudprovider.ControllerClientBuilder
}

// TestInitializeStopsEverythingOnStop runs in a bubble: synctest.Test
// fails with a deadlock if a goroutine Initialize started is still
// blocked when the test returns, which is the leak this test is about.
func TestInitializeStopsEverythingOnStop(t *testing.T) {
	synctest.Test(t, testInitializeStopsEverythingOnStop)
}

func testInitializeStopsEverythingOnStop(t *testing.T) {
	w := &worker{stopped: make(chan struct{})}
	// The same object serves three capabilities: it is initialized once.
	c := mustNew(t, "test", Options{ClusterID: "id", LoadBalancer: w, InstancesV2: w, Routes: w})
	stop := make(chan struct{})
	cb := builder{}
	c.Initialize(cb, stop)
	c.Initialize(cb, stop) // ignored

	if got := w.inits.Load(); got != 1 {
		t.Fatalf("Initialize calls on a capability shared by three fields: got %d, want 1", got)
	}
	if w.builder != cb {
		t.Errorf("capability got client builder %#v, want the one passed to Initialize", w.builder)
	}
	if err := c.Context().Err(); err != nil {
		t.Fatalf("context done before stop: %v", err)
	}
	select {
	case <-w.stopped:
		t.Fatal("capability stopped before the stop channel was closed")
	default:
	}

	close(stop)
	select {
	case <-w.stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("capability context not cancelled 10s after stop was closed")
	}
	c.Shutdown() // waits for Cloud's own goroutine
}

func TestShutdownWithoutStop(t *testing.T) {
	c := mustNew(t, "test", Options{})
	c.Shutdown() // before Initialize: no-op
	c.Initialize(builder{}, make(chan struct{}))
	c.Shutdown()
	c.Shutdown()
	if c.Context().Err() == nil {
		t.Error("Context not done after Shutdown")
	}
}

func TestSetInformersFansOut(t *testing.T) {
	w := &worker{stopped: make(chan struct{})}
	c := mustNew(t, "test", Options{LoadBalancer: w, Zones: &fakecloud.Cloud{}})
	f := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	c.SetInformers(f)
	if w.informer != f {
		t.Errorf("InformerUser capability got factory %v, want %v", w.informer, f)
	}
}

// mustNew is New, failing t on an error.
func mustNew(t *testing.T, name string, opts Options) *Cloud {
	t.Helper()
	c, err := New(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, provider, clusterID string
		reason, want              string
	}{
		{name: "empty name", provider: "", reason: "an empty scheme makes every provider ID unparseable", want: `name ""`},
		{name: "digit first", provider: "1acme", reason: "RFC 3986: a scheme starts with a letter", want: `name "1acme"`},
		{name: "separator", provider: "acme://", reason: "the separator is not part of the scheme", want: `name "acme://"`},
		{name: "space", provider: "ac me", reason: "white space is not a scheme character", want: `name "ac me"`},
		{name: "cluster ID padded", provider: "acme", clusterID: " prod ", reason: "ownership tags compare the cluster ID exactly", want: `Options.ClusterID " prod "`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.provider, Options{ClusterID: tc.clusterID})
			if err == nil || c != nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "expected") {
				t.Errorf("New(%q, ClusterID %q) = %v, %v: expected a nil Cloud and an error naming %s and what was expected (%s)", tc.provider, tc.clusterID, c, err, tc.want, tc.reason)
			}
		})
	}
	for _, ok := range []string{"a", "acme", "acme-cloud", "x.y+z", "Fake9"} {
		if _, err := New(ok, Options{}); err != nil {
			t.Errorf("New(%q): %v: expected no error for a valid scheme", ok, err)
		}
	}
}

// lag, embedded beside a capability, makes it report MaxStaleness lag.
type lag time.Duration

func (l lag) MaxStaleness() time.Duration { return time.Duration(l) }

// lagging is the k8s.io/cloud-provider fake (a value of every capability
// interface) reporting its lag as MaxStaleness.
type lagging struct {
	*fakecloud.Cloud
	lag
}

func TestCloudMaxStaleness(t *testing.T) {
	plain := &fakecloud.Cloud{}
	var typedNil *lagging
	minute := &lagging{&fakecloud.Cloud{}, lag(time.Minute)}
	tests := []struct {
		name   string
		reason string
		opts   Options
		want   time.Duration
	}{
		{name: "none", reason: "no capability: nothing lags", want: 0},
		{name: "fresh capabilities", reason: "a capability without MaxStaleness counts 0",
			opts: Options{LoadBalancer: plain, InstancesV2: plain, Routes: plain}, want: 0},
		{name: "typed nil", reason: "a typed nil is no capability and is not called", opts: Options{LoadBalancer: typedNil}, want: 0},
		{name: "longest", reason: "the longest of the capabilities, not their sum",
			opts: Options{LoadBalancer: &lagging{plain, lag(10 * time.Second)}, InstancesV2: minute, Routes: plain}, want: time.Minute},
		{name: "every field", reason: "each capability field counts",
			opts: Options{Instances: minute, Zones: &lagging{plain, lag(2 * time.Minute)}, Clusters: &lagging{plain, lag(3 * time.Minute)}}, want: 3 * time.Minute},
		{name: "routes", reason: "a route table that remembers its list counts",
			opts: Options{InstancesV2: minute, Routes: &lagging{plain, lag(90 * time.Second)}}, want: 90 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New("acme", tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.MaxStaleness(); got != tt.want {
				t.Errorf("MaxStaleness() = %v, want %v (%s)", got, tt.want, tt.reason)
			}
		})
	}
}
