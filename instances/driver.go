package instances

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/internal/listcache"
	"github.com/ccmkit/ccmkit/provider"
)

// ErrNotFound is the sentinel a Driver returns when the cloud definitely
// says an instance does not exist. It is cloudprovider.InstanceNotFound
// itself, so a Driver may return either name, wrapped or not (the Adapter
// and the Cache test with errors.Is).
//
// Return it only for a definite answer ("no such instance", HTTP 404 on the
// instance resource): the Adapter turns it into InstanceExists == (false, nil),
// and the node-lifecycle controller deletes the Node at once. Timeouts,
// throttling, authorization failures, a 404 on the API endpoint itself and
// every other doubt must be some other error. An error that wraps an
// *api.RetryError (throttled, see Driver) is never read as not-found, even
// if it also wraps ErrNotFound.
var ErrNotFound = cloudprovider.InstanceNotFound

// ErrInvalidInstance is wrapped by the errors the Adapter returns
// when a Driver hands back an Instance that breaks the Driver contract: an
// empty or mismatched ID or Name, an unknown State, an invalid label, or
// addresses BuildAddresses rejects. It is a driver bug, never "not found".
var ErrInvalidInstance = errors.New("driver returned an invalid instance")

// ErrInconsistent is wrapped by the errors a Cache returns when its
// ListDriver's List answers an ID more than once, or one name for more
// than one live instance: the Cache refuses to pick one (see Cache,
// Inconsistent lists). It is a driver bug or a conflict in the cloud,
// never "not found". It is the same value as loadbalancer.ErrInconsistent.
var ErrInconsistent = listcache.ErrInconsistent

// State is the lifecycle state of a cloud instance, as the Adapter reports
// it. The zero value is StateRunning.
type State int

const (
	// StateRunning is an instance that exists and is not shut down; map
	// transitional states such as "pending", "starting" or "rebooting" to it.
	// InstanceExists is (true, nil), InstanceShutdown is (false, nil).
	StateRunning State = iota
	// StateStopped is an instance that exists but is powered off or
	// suspended; map "stopping" to it too. InstanceExists is (true, nil) and
	// InstanceShutdown is (true, nil), so the node-lifecycle controller taints
	// the Node node.cloudprovider.kubernetes.io/shutdown instead of deleting it.
	StateStopped
	// StateTerminated is an instance the cloud still lists but that is gone
	// for good (deleted, terminated, "shutting-down" towards deletion).
	// InstanceExists is (false, nil): the Node is deleted.
	StateTerminated
)

// String returns "Running", "Stopped", "Terminated" or "State(n)".
func (s State) String() string {
	switch s {
	case StateRunning:
		return "Running"
	case StateStopped:
		return "Stopped"
	case StateTerminated:
		return "Terminated"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// stateNames are the text forms of the States, in State order.
var stateNames = [...]string{"running", "stopped", "terminated"}

// MarshalText returns "running", "stopped" or "terminated", the form a
// cloud-config or a state file writes (the fake's, for one); an unknown
// State is an error naming it.
func (s State) MarshalText() ([]byte, error) {
	if !s.valid() {
		return nil, fmt.Errorf("instances.State %d: expected one of %s", int(s), strings.Join(stateNames[:], ", "))
	}
	return []byte(stateNames[s]), nil
}

// UnmarshalText parses "running", "stopped" or "terminated" (as spelled);
// "" is the zero value, StateRunning. Anything else is an error naming the
// value and the accepted ones.
func (s *State) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*s = StateRunning
		return nil
	}
	for i, name := range stateNames {
		if string(text) == name {
			*s = State(i)
			return nil
		}
	}
	return fmt.Errorf("state %q: expected one of %s", cut(string(text)), strings.Join(stateNames[:], ", "))
}

func (s State) valid() bool { return s >= StateRunning && s <= StateTerminated }

// Instance is what a Driver knows about one cloud instance. It is a plain
// value: the Adapter and the Cache never modify an Instance, its Addresses or
// its Labels, and copy them before handing them on, so a Driver may return
// slices and maps it keeps (it must not modify them afterwards while a Cache
// holds them).
type Instance struct {
	// ID is the instance ID, the last segment of the provider ID. Required,
	// unique within the provider (the Cache indexes on it), and accepted by
	// provider.Codec.Format (no "/", whitespace or control characters).
	ID string
	// Path holds optional provider-ID segments written between the scheme
	// and ID, such as a region: Path ["eu-1"] and ID "i-1" give
	// "<scheme>://eu-1/i-1". It is used only to format the provider ID of a
	// Node that has none yet; it is not part of the instance's identity.
	Path []string
	// Name is the name of the Node this instance registers as (usually its
	// hostname). Required for look-ups by name and for the Cache's name
	// index; GetByName must return an instance whose Name equals the name
	// asked for.
	Name string
	// State is the lifecycle state; the zero value is StateRunning.
	State State
	// Type is the instance type, written to the node.kubernetes.io/instance-type
	// label. Optional; when set it must be a valid label value.
	Type string
	// Zone and Region are written to the topology.kubernetes.io/zone and
	// topology.kubernetes.io/region labels. Optional; when set they must be
	// valid label values.
	Zone, Region string
	// Addresses are the instance's addresses in any order, with duplicates
	// allowed; the Adapter runs them through BuildAddresses with its
	// Options.Addresses. A running or stopped instance must have at least one
	// InternalIP unless Options.Addresses.AllowNoInternalIP is set.
	Addresses []v1.NodeAddress
	// Labels become InstanceMetadata.AdditionalLabels. Keys must be valid
	// qualified names, values valid label values, and no key may be in the
	// kubernetes.io or k8s.io namespaces (including subdomains such as
	// node.kubernetes.io/), which the node controller discards: the Adapter
	// reports such a label as an ErrInvalidInstance error instead of letting
	// it vanish silently.
	Labels map[string]string
}

// Driver is the cloud-specific part an Adapter needs: two look-ups of a
// single instance. Implementations must be safe for concurrent use: the
// upstream controllers call the Adapter from several workers at once.
//
// Both methods return either a valid Instance and a nil error, or an error.
// The error is ErrNotFound (== cloudprovider.InstanceNotFound, optionally
// wrapped) only when the cloud definitely reports that no such instance
// exists; any other error means "unknown" and is never reported as gone.
// An instance the cloud still knows about but that was deleted may be
// returned with StateTerminated instead of ErrNotFound; both mean gone.
//
// Throttling: when the cloud refuses a call for now ("429 Too Many
// Requests, Retry-After: D", a rate-limit error code), return an error
// wrapping an *api.RetryError (k8s.io/cloud-provider/api,
// api.NewRetryError(msg, D)) whose RetryAfter is D, or your best estimate
// when the cloud gives none. It is ccmkit's one convention for "throttled,
// retry after D" in every block (loadbalancer, routes, instances), found
// with errors.As. The Adapter never reports an instance gone on such an
// error: it returns it wrapped, so InstanceExists is (false, err) and the
// controller tries again at its next sync; a Cache does not List again
// before D has passed.
type Driver interface {
	// GetByID returns the instance whose ID is id.ID. id is the parsed
	// spec.providerID of a Node, already checked to have the Adapter's scheme;
	// id.Path carries any segments before the ID (such as a region) for
	// clouds that need them to find the instance. The returned Instance.ID
	// must equal id.ID.
	GetByID(ctx context.Context, id provider.ProviderID) (Instance, error)
	// GetByName returns the instance that registers as the Node called
	// name. It is used only for Nodes that have no spec.providerID yet.
	// When more than one live instance has that name it must return an error
	// other than ErrNotFound.
	GetByName(ctx context.Context, name string) (Instance, error)
}

// ListDriver is a Driver that can also list every instance in one call; it
// is what NewCache wraps. Implementations must be safe for concurrent use.
type ListDriver interface {
	Driver
	// List returns every instance the provider may be asked about (it may
	// return more), each ID once: a Cache refuses a list that repeats one,
	// even as an exact copy (ErrInconsistent; see Cache). It returns an
	// error, never a partial list, when it cannot list everything: an
	// instance missing from a successful List is only a hint that it may
	// be gone, which the Cache confirms with GetByID or GetByName before
	// reporting it. The caller keeps the returned slice and the Instances
	// in it: do not modify them afterwards. When the cloud throttles the
	// call, return an error wrapping an *api.RetryError as for Driver: the
	// Cache then makes no List call before its RetryAfter has passed.
	List(ctx context.Context) ([]Instance, error)
}
