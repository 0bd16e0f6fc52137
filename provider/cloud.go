package provider

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/staleness"
)

// Options configures a Cloud: the cluster it serves and the optional
// parts of a cloud provider it offers. Every field is optional. A nil
// capability field, or a typed nil (a nil *T stored in the interface), means
// the provider does not offer that part and the matching accessor of Cloud
// returns (nil, false).
type Options struct {
	// ClusterID identifies the cluster whose cloud resources this provider
	// owns; HasClusterID reports whether it is set. "" means none: the
	// cloud-controller-manager then stops unless --allow-untagged-cloud is
	// set.
	ClusterID string
	// LoadBalancer is returned by Cloud.LoadBalancer; nil means none.
	LoadBalancer cloudprovider.LoadBalancer
	// InstancesV2 is returned by Cloud.InstancesV2; nil means none.
	InstancesV2 cloudprovider.InstancesV2
	// Instances is the legacy interface, returned by Cloud.Instances; nil
	// means none. The node controllers use InstancesV2 when it is present
	// and ignore Instances and Zones.
	Instances cloudprovider.Instances
	// Zones is returned by Cloud.Zones; nil means none.
	Zones cloudprovider.Zones
	// Clusters is returned by Cloud.Clusters; nil means none.
	Clusters cloudprovider.Clusters
	// Routes is returned by Cloud.Routes; nil means none.
	Routes cloudprovider.Routes
}

// Initializer is implemented by capabilities that need the Kubernetes client
// or run background work. Cloud.Initialize calls Initialize once on each
// distinct capability that implements it, in the field order of
// Options.
//
// ctx is cancelled when the stop channel given to Cloud.Initialize is
// closed; work started by the capability must end when ctx is done. The
// capability owns any goroutine it starts.
type Initializer interface {
	Initialize(ctx context.Context, clientBuilder cloudprovider.ControllerClientBuilder)
}

// Staleness is implemented by a value whose answers may come from state
// it read earlier: a cache, or a capability over one. MaxStaleness
// reports the longest time the value's answers may lag a change made to
// the cloud behind its back (0: they never do). It calls no cloud API, is
// safe for concurrent use and is never negative.
//
// A provider's CCM does not need it: the controllers know nothing of
// it. testing/conformance waits that much longer for such a change to
// show (a terminated instance, a load balancer changed in the cloud's
// console), so a provider composed from ccmkit's caches passes at their
// defaults without declaring their TTLs.
//
// ccmkit's blocks report it up the composition: instances.Cache and
// loadbalancer.Cache report their TTL, routes.Table its ListTTL, each
// plus the MaxStaleness of what it wraps; instances.Adapter and
// loadbalancer.Reconciler report what they wrap; Cloud reports the
// longest of its capabilities. A value that does not implement it
// counts as 0. A provider's Driver that caches answers of its own
// implements it to be counted.
type Staleness interface {
	MaxStaleness() time.Duration
}

// Cloud is a cloudprovider.Interface composed from the capabilities of its
// Options. Construct it
// with New. Its accessors are safe for concurrent use; Initialize and
// SetInformers are called once by the cloud-controller-manager, before the
// controllers start.
type Cloud struct {
	name string
	opts Options

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

var (
	_ cloudprovider.Interface    = (*Cloud)(nil)
	_ cloudprovider.InformerUser = (*Cloud)(nil)
	_ Staleness                  = (*Cloud)(nil)
)

// New returns a Cloud named name (the value of ProviderName, and the scheme
// of the provider IDs it writes) offering the capabilities of opts, for the
// cluster opts.ClusterID. New starts nothing. It returns an error naming the
// field and its value when name is not a provider-ID scheme (a letter, then
// letters, digits, '+', '-' or '.'; RFC 3986 section 3.1), which the
// cloud-controller-manager would otherwise register and every provider ID
// would then fail to parse, or when opts.ClusterID has leading or trailing
// white space (ownership tags compare it exactly). Every capability field
// is optional.
func New(name string, opts Options) (*Cloud, error) {
	if !validScheme(name) {
		return nil, fmt.Errorf("provider.New: name %s: expected a provider-ID scheme (a letter, then letters, digits, '+', '-' or '.')", quote(name))
	}
	if strings.TrimSpace(opts.ClusterID) != opts.ClusterID {
		return nil, fmt.Errorf("provider.New: Options.ClusterID %s: expected no leading or trailing white space", quote(opts.ClusterID))
	}
	return &Cloud{name: name, opts: opts}, nil
}

// validScheme reports whether s is a URI scheme (RFC 3986 section 3.1).
func validScheme(s string) bool {
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// accessor implements the (impl, true) or (nil, false) rule of
// k8s.io/cloud-provider cloud.go (Interface): the node-lifecycle controller
// dereferences the value whenever the bool is true.
func accessor[T any](v T) (T, bool) {
	if check.IsNil(v) {
		var zero T
		return zero, false
	}
	return v, true
}

// LoadBalancer implements cloudprovider.Interface.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	return accessor(c.opts.LoadBalancer)
}

// Instances implements cloudprovider.Interface.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return accessor(c.opts.Instances) }

// InstancesV2 implements cloudprovider.Interface.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return accessor(c.opts.InstancesV2) }

// Zones implements cloudprovider.Interface.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return accessor(c.opts.Zones) }

// Clusters implements cloudprovider.Interface.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return accessor(c.opts.Clusters) }

// Routes implements cloudprovider.Interface.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return accessor(c.opts.Routes) }

// ProviderName implements cloudprovider.Interface: the name given to New.
func (c *Cloud) ProviderName() string { return c.name }

// HasClusterID implements cloudprovider.Interface: true when
// Options.ClusterID is not empty. Without one the cloud-controller-manager
// stops unless --allow-untagged-cloud is set.
func (c *Cloud) HasClusterID() bool { return c.opts.ClusterID != "" }

// MaxStaleness implements Staleness: the longest MaxStaleness of the
// capabilities of its Options (LoadBalancer, InstancesV2, Instances,
// Zones, Clusters, Routes) that implement Staleness, 0 when none does.
// It is safe for concurrent use.
func (c *Cloud) MaxStaleness() time.Duration { return staleness.Max(c.distinct()...) }

// distinct returns the present capabilities, each once, in field order.
func (c *Cloud) distinct() []any {
	var out []any
	for _, v := range []any{c.opts.LoadBalancer, c.opts.InstancesV2, c.opts.Instances, c.opts.Zones, c.opts.Clusters, c.opts.Routes} {
		if !check.IsNil(v) && !slices.ContainsFunc(out, func(seen any) bool { return sameValue(seen, v) }) {
			out = append(out, v)
		}
	}
	return out
}

// sameValue reports whether a and b are the same capability object, without
// panicking on uncomparable dynamic types.
func sameValue(a, b any) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb || !ta.Comparable() {
		return false
	}
	return a == b
}

// Initialize implements cloudprovider.Interface. It derives a context that
// is cancelled when stop is closed and passes it, with clientBuilder, to
// every capability that implements Initializer. The only goroutine it starts
// waits for stop (or Shutdown) and ends with it. Calls after the first are
// ignored.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.mu.Lock()
	if c.ctx != nil {
		c.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.ctx, c.cancel, c.done = ctx, cancel, make(chan struct{})
	c.mu.Unlock()

	go func() {
		defer close(c.done)
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for _, v := range c.distinct() {
		if in, ok := v.(Initializer); ok {
			in.Initialize(ctx, clientBuilder)
		}
	}
}

// Context returns the context derived by Initialize, or nil before
// Initialize. It is done once stop is closed or Shutdown is called.
func (c *Cloud) Context() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ctx
}

// Shutdown cancels the context given to the capabilities, as closing the
// stop channel does, and waits for Cloud's own goroutine to end. It is for
// tests and embedders that own no stop channel; it is safe to call more than
// once and before Initialize.
func (c *Cloud) Shutdown() {
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// SetInformers implements cloudprovider.InformerUser: it passes the factory
// to every capability that implements cloudprovider.InformerUser. The
// cloud-controller-manager calls it after Initialize (k8s.io/cloud-provider
// app/controllermanager.go, Run).
func (c *Cloud) SetInformers(factory informers.SharedInformerFactory) {
	for _, v := range c.distinct() {
		if iu, ok := v.(cloudprovider.InformerUser); ok {
			iu.SetInformers(factory)
		}
	}
}
