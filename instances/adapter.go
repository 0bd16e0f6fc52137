package instances

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/nodelabel"
	"github.com/ccmkit/ccmkit/internal/staleness"
	"github.com/ccmkit/ccmkit/internal/throttle"
	"github.com/ccmkit/ccmkit/provider"
)

// Options configures an Adapter. The zero value is the default.
type Options struct {
	// Addresses is applied to every instance's addresses through
	// BuildAddresses. The zero value requires at least one InternalIP and
	// lists IPv4 before IPv6 (see AddressPolicy). Its ProvidedNodeIP must be
	// empty: the Adapter takes it from each Node's
	// alpha.kubernetes.io/provided-node-ip annotation.
	Addresses AddressPolicy
}

// Adapter implements cloudprovider.InstancesV2 over a Driver.
//
// Look-up: a Node with spec.providerID is looked up with Driver.GetByID (the
// provider ID must parse with the Adapter's Codec; a malformed one, or one of
// another scheme, is an error wrapping provider.ErrMalformedProviderID,
// ErrEmptyProviderID or ErrForeignProviderID and is never "not found"). A
// Node without one is looked up with Driver.GetByName(node.Name), as
// cloud.go's InstancesV2 documentation asks.
//
// Answers, per look-up result:
//
//	result                          InstanceExists  InstanceShutdown      InstanceMetadata
//	StateRunning                    (true, nil)     (false, nil)          (metadata, nil)
//	StateStopped                    (true, nil)     (true, nil)           (metadata, nil)
//	StateTerminated or ErrNotFound  (false, nil)    (false, NotFound)     (nil, NotFound)
//	throttled (api.RetryError)      (false, err)    (false, err)          (nil, err)
//	any other error                 (false, err)    (false, err)          (nil, err)
//
// where NotFound is cloudprovider.InstanceNotFound, returned unwrapped
// because callers compare it with ==. (false, nil) from InstanceExists makes
// the node-lifecycle controller delete the Node at once (MonitorNodes in
// controllers/nodelifecycle/node_lifecycle_controller.go), so it is only ever
// the answer to a definite "gone" from the Driver. That controller calls
// InstanceShutdown only after InstanceExists said true; for an instance that
// vanished in between there is nothing to shut down, hence the error rather
// than a shutdown taint. Other errors name the node and wrap the Driver's
// error. A throttled error (one wrapping an *api.RetryError, see Driver) is
// never "gone", even if it also wraps ErrNotFound, and stays findable with
// errors.As in what the Adapter returns.
//
// InstanceMetadata never returns (nil, nil). Its ProviderID is spec.providerID
// verbatim when the Node has one, and the Codec's Format(Instance.ID,
// Instance.Path...) otherwise; InstanceType, Zone and Region must be valid
// label values; NodeAddresses are BuildAddresses(Instance.Addresses) with
// Options.Addresses and the Node's provided-node-ip annotation;
// AdditionalLabels are Instance.Labels, validated (see Instance.Labels). An
// Instance that breaks these rules yields an error wrapping
// ErrInvalidInstance and, for addresses, ErrInvalidAddress, ErrNoInternalIP or
// ErrProvidedNodeIP.
//
// Node arguments are never modified. An Adapter is safe for concurrent use if
// its Driver is. Create it with NewAdapter; the zero value is not usable.
type Adapter struct {
	driver Driver // as the Adapter calls it: metered unless a Cache (meteredDriver)
	given  Driver // as given (MaxStaleness)
	codec  provider.Codec
	opts   Options
}

var (
	_ cloudprovider.InstancesV2 = (*Adapter)(nil)
	_ provider.Staleness        = (*Adapter)(nil)
)

// NewAdapter returns an Adapter over d that parses and formats provider IDs
// with codec. codec.Scheme is required: the provider name the provider is
// registered under. It returns an error when d is nil (a typed nil
// included), codec.Scheme is empty or not a valid scheme, or
// opts.Addresses.ProvidedNodeIP is set. It starts nothing and does not
// call d.
func NewAdapter(d Driver, codec provider.Codec, opts Options) (*Adapter, error) {
	if err := check.Driver("instances.NewAdapter", d, "instances.Driver"); err != nil {
		return nil, err
	}
	if codec.Scheme == "" {
		return nil, errors.New("instances.NewAdapter: codec.Scheme is empty: expected the provider name")
	}
	if _, err := codec.Format("x"); err != nil {
		return nil, fmt.Errorf("instances.NewAdapter: codec.Scheme %q: %w", codec.Scheme, err)
	}
	if opts.Addresses.ProvidedNodeIP != "" {
		return nil, fmt.Errorf("instances.NewAdapter: Options.Addresses.ProvidedNodeIP %q: expected empty, it is read from each Node's %s annotation",
			opts.Addresses.ProvidedNodeIP, cloudproviderapi.AnnotationAlphaProvidedIPAddr)
	}
	return &Adapter{driver: meteredDriver(d), given: d, codec: codec, opts: opts}, nil
}

// MaxStaleness implements provider.Staleness: the MaxStaleness of the
// Adapter's Driver when it implements provider.Staleness (a Cache's TTL,
// or a provider's Driver embedding a Cache), and otherwise 0: the
// Adapter itself remembers nothing between calls. It is safe for
// concurrent use and calls no Driver method but MaxStaleness.
func (a *Adapter) MaxStaleness() time.Duration { return staleness.Of(a.given) }

// InstanceExists implements cloudprovider.InstancesV2; see Adapter for the
// answers.
func (a *Adapter) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	_, err := a.lookup(ctx, node)
	if errors.Is(err, errGone) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// InstanceShutdown implements cloudprovider.InstancesV2; see Adapter for the
// answers.
func (a *Adapter) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	inst, err := a.lookup(ctx, node)
	if errors.Is(err, errGone) {
		return false, cloudprovider.InstanceNotFound
	}
	if err != nil {
		return false, err
	}
	return inst.State == StateStopped, nil
}

// InstanceMetadata implements cloudprovider.InstancesV2; see Adapter for the
// answers and the validation applied.
func (a *Adapter) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	inst, err := a.lookup(ctx, node)
	if errors.Is(err, errGone) {
		return nil, cloudprovider.InstanceNotFound
	}
	if err != nil {
		return nil, err
	}
	return a.metadata(node, inst)
}

// errGone is lookup's internal signal for a definite "gone"; it never leaves
// the package.
var errGone = errors.New("instance is gone")

// lookup finds the instance of node: by provider ID when set, else by name.
// It returns errGone for a definite not-found or a terminated instance, and
// otherwise a validated Instance or an error naming the node.
func (a *Adapter) lookup(ctx context.Context, node *v1.Node) (Instance, error) {
	if node == nil {
		return Instance{}, errors.New("node is nil: expected the Node the controller asks about")
	}
	var (
		inst Instance
		err  error
		by   string
	)
	if pid := node.Spec.ProviderID; pid != "" {
		id, perr := a.codec.Parse(pid)
		if perr != nil {
			return Instance{}, fmt.Errorf("node %q: spec.providerID: %w", node.Name, perr)
		}
		by = fmt.Sprintf("provider ID %q", pid)
		inst, err = a.driver.GetByID(ctx, id)
		if err == nil && inst.ID != id.ID {
			err = fmt.Errorf("%w: GetByID(%q) returned instance ID %q: expected %q", ErrInvalidInstance, id.ID, inst.ID, id.ID)
		}
	} else {
		if node.Name == "" {
			return Instance{}, errors.New(`node "": spec.providerID and metadata.name are empty: expected either`)
		}
		by = "name"
		inst, err = a.driver.GetByName(ctx, node.Name)
		if err == nil && inst.Name != node.Name {
			err = fmt.Errorf("%w: GetByName(%q) returned instance %q named %q: expected the name %q", ErrInvalidInstance, node.Name, inst.ID, inst.Name, node.Name)
		}
	}
	if errors.Is(err, ErrNotFound) {
		d, throttled := throttle.RetryAfter(err)
		if !throttled {
			return Instance{}, errGone
		}
		// Throttled wins: keep the text and the delay, drop the sentinel.
		err = throttle.Delay(errors.New(err.Error()), d)
	}
	if err != nil {
		return Instance{}, fmt.Errorf("node %q: looking up instance by %s: %w", node.Name, by, err)
	}
	if inst.ID == "" {
		return Instance{}, fmt.Errorf("node %q: %w: instance found by %s has an empty ID: expected its instance ID", node.Name, ErrInvalidInstance, by)
	}
	if !inst.State.valid() {
		return Instance{}, fmt.Errorf("node %q: %w: instance %q has State %v: expected Running, Stopped or Terminated", node.Name, ErrInvalidInstance, inst.ID, inst.State)
	}
	if inst.State == StateTerminated {
		return Instance{}, errGone
	}
	return inst, nil
}

func (a *Adapter) metadata(node *v1.Node, inst Instance) (*cloudprovider.InstanceMetadata, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("node %q: %w: instance %q: %s", node.Name, ErrInvalidInstance, inst.ID, fmt.Sprintf(format, args...))
	}
	pid := node.Spec.ProviderID
	if pid == "" {
		var err error
		if pid, err = a.codec.Format(inst.ID, inst.Path...); err != nil {
			return nil, invalid("formatting the provider ID from ID %q and Path %q: %v", inst.ID, inst.Path, err)
		}
	}
	for _, f := range []struct{ field, value string }{{"Type", inst.Type}, {"Zone", inst.Zone}, {"Region", inst.Region}} {
		if f.value == "" {
			continue
		}
		if problem := nodelabel.ValueProblem(f.value); problem != "" {
			return nil, invalid("%s %q: %s", f.field, f.value, problem)
		}
	}
	var labels map[string]string
	if len(inst.Labels) > 0 {
		for _, k := range slices.Sorted(maps.Keys(inst.Labels)) {
			v := inst.Labels[k]
			if problem := nodelabel.KeyProblem(k); problem != "" {
				return nil, invalid("label key %q: %s", k, problem)
			}
			if problem := nodelabel.ValueProblem(v); problem != "" {
				return nil, invalid("label %q value %q: %s", k, v, problem)
			}
		}
		labels = maps.Clone(inst.Labels)
	}
	policy := a.opts.Addresses
	if ip, ok := node.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr]; ok {
		if ip == "" {
			// The node controller passes a present-but-empty annotation to
			// GetNodeAddressesFromNodeIP, which fails to parse it.
			return nil, fmt.Errorf("node %q: %w: annotation %s is present but empty: expected an IP address, or a dual-stack pair \"a,b\"", node.Name, ErrProvidedNodeIP, cloudproviderapi.AnnotationAlphaProvidedIPAddr)
		}
		policy.ProvidedNodeIP = ip
	}
	addrs, err := BuildAddresses(inst.Addresses, policy)
	if errors.Is(err, ErrProvidedNodeIP) {
		// The kubelet's annotation, not the driver, disagrees.
		return nil, fmt.Errorf("node %q: instance %q: %w", node.Name, inst.ID, err)
	}
	if err != nil {
		return nil, fmt.Errorf("node %q: %w: instance %q: %w", node.Name, ErrInvalidInstance, inst.ID, err)
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:       pid,
		InstanceType:     inst.Type,
		NodeAddresses:    addrs,
		Zone:             inst.Zone,
		Region:           inst.Region,
		AdditionalLabels: labels,
	}, nil
}
