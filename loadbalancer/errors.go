package loadbalancer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ccmkit/ccmkit/internal/clip"
	"github.com/ccmkit/ccmkit/internal/throttle"
)

var (
	// ErrInvalidService marks input the user can fix on the Service: a
	// field of its spec or metadata that Desired or the Reconciler cannot
	// use. It is always wrapped, with the field, its value and what was
	// expected: test with errors.Is. (A malformed declared annotation is
	// annotation.ErrInvalid instead.)
	ErrInvalidService = errors.New("invalid service")

	// ErrUnsupported marks a Service feature the provider did not declare
	// in its Capabilities. The concrete error is an *UnsupportedError,
	// returned wrapped by the Reconciler: test with errors.Is.
	ErrUnsupported = errors.New("unsupported by this provider")

	// ErrNotOwned marks a load balancer owned by another cluster or
	// Service (or by nobody, when found by name): ccmkit refuses to change
	// or delete it. The concrete error is an *OwnershipError, returned
	// wrapped by the Reconciler: test with errors.Is.
	ErrNotOwned = errors.New("load balancer not owned by this service")

	// ErrNotFound means the load balancer the call names does not exist:
	// UpdateLoadBalancer's when the Service has none, EnsureLoadBalancer's
	// when the stored ID names one that does not exist. Always wrapped:
	// test with errors.Is.
	ErrNotFound = errors.New("load balancer not found")

	// ErrNameTaken is wrapped by the error a Driver whose Capabilities
	// declare UniqueNames returns for an ActionCreate of a name another
	// load balancer of the cloud already has (AWS, GCE, Azure and Hetzner
	// refuse such a create with a 409 or 400 "already exists"): the create
	// changed nothing, so the Driver wraps ErrRefused beside it. The
	// Reconciler then asks the cloud for the Service's load balancers
	// again and converges the one it finds, or reports the name's owner.
	ErrNameTaken = errors.New("load balancer name taken")
)

// ErrRefused is wrapped by the error of a Driver call that the cloud
// refused before it changed anything: a 409 "busy" or "immutable"
// answered before any write, a 429. A Driver wraps it
// (fmt.Errorf("...: %w", loadbalancer.ErrRefused), or errors.Join) beside
// the error that says why (an *api.RetryError for a 429, a *BusyError for a
// busy load balancer, see Driver), and only when it is sure: a Driver that
// makes several cloud calls for one Action and is refused after the first
// must not wrap it. A Cache then keeps vouching for the load balancer the
// call named, so the refusal costs no confirming Find; without it the
// Cache asks the cloud at the next look-up (see Cache).
//
// It is the same value as the refusals of package governor and of the fake
// cloud's rate limit wrap, so errors.Is(err, ErrRefused) holds for those
// too.
var ErrRefused = throttle.ErrRefused

// UnsupportedError reports a Service feature the provider cannot build.
// errors.Is(err, ErrUnsupported) is true.
type UnsupportedError struct {
	// Feature is the Capabilities field that is false, e.g. "UDP", or
	// "AppProtocols" for an application protocol it does not list.
	Feature string
	// Detail names the Service field and value that asked for it.
	Detail string
}

// Error names the Service field, the feature and the Capabilities field.
func (e *UnsupportedError) Error() string {
	if e.Feature == "AppProtocols" { // a list, not a flag: Detail names what it holds
		return fmt.Sprintf("%s: not among the application protocols of this provider (Capabilities.AppProtocols)", e.Detail)
	}
	return fmt.Sprintf("%s: %s is not supported by this provider (Capabilities.%s is false)", e.Detail, e.Feature, e.Feature)
}

// Is reports whether target is ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// OwnershipError reports a load balancer that is not ours to touch.
// errors.Is(err, ErrNotOwned) is true.
type OwnershipError struct {
	// ID and Name identify the cloud load balancer.
	ID, Name string
	// Want is the owner ccmkit looked for.
	Want Owner
	// Got is the owner recorded in the load balancer's tags (zero when
	// it has no ccmkit tags).
	Got Owner
	// How is how the load balancer was found: "id annotation <name>"
	// (its ID is the annotation's value), "name", or "plan" (the actual
	// load balancer given to Plan).
	How string
	// Owned, when set, are the IDs of the load balancers the Service
	// already owns (found by its ownership tags): the load balancer found
	// by How has no ccmkit tags and could be adopted, but adopting it
	// would give the Service a second one (see the package doc, "Lookup
	// order, rename and adoption").
	Owned []string
}

// Error names the load balancer, how it was found, its owner and the
// expected owner, and the owned load balancers when Owned is set.
func (e *OwnershipError) Error() string {
	if len(e.Owned) > 0 {
		owned := make([]string, len(e.Owned))
		for i, id := range e.Owned {
			owned[i] = strconv.Quote(id)
		}
		return fmt.Sprintf("load balancer %q (id %q) found by %s has no ccmkit ownership tags, but service %s (cluster %q service UID %q) already owns load balancer %s (found by its ownership tags): refusing to adopt a second one: expected the annotation to name %s, or no annotation",
			e.Name, e.ID, e.How, e.Want.namespacedName(), e.Want.Cluster, e.Want.UID, strings.Join(owned, ", "), owned[0])
	}
	got := "no ccmkit ownership tags"
	if e.Got.Cluster != "" || e.Got.UID != "" {
		got = fmt.Sprintf("owned by cluster %q service UID %q (%s)", e.Got.Cluster, e.Got.UID, e.Got.namespacedName())
	}
	return fmt.Sprintf("load balancer %q (id %q) found by %s is %s, refusing to touch it: expected cluster %q service UID %q",
		e.Name, e.ID, e.How, got, e.Want.Cluster, e.Want.UID)
}

// Is reports whether target is ErrNotOwned.
func (e *OwnershipError) Is(target error) bool { return target == ErrNotOwned }

// errNilService is the error of a call given a nil Service, Desired's and
// the Reconciler's alike: a caller's mistake, reported rather than a panic.
var errNilService = invalidService("service is nil: expected a Service of type LoadBalancer")

// cut returns s cut to clip.MaxQuoted bytes with its length (clip.Quoted).
func cut(s string) string { return clip.Quoted(s) }

func invalidService(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidService}, args...)...)
}
