package loadbalancer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

var (
	// ErrInvalidService marks an error caused by the Service's spec (a
	// field the user can fix). Errors are wrapped: test with errors.Is.
	ErrInvalidService = errors.New("invalid service")

	// ErrInvalidAnnotation marks a malformed annotation value; the
	// concrete error is an *AnnotationError. Test with errors.Is.
	ErrInvalidAnnotation = errors.New("invalid annotation")

	// ErrUnsupported marks a Service feature the provider did not declare
	// in its Capabilities; the concrete error is an *UnsupportedError.
	ErrUnsupported = errors.New("unsupported by this provider")

	// ErrNotOwned marks a load balancer owned by another cluster or
	// Service (or by nobody, when found by name): ccmkit refuses to change
	// or delete it. The concrete error is an *OwnershipError.
	ErrNotOwned = errors.New("load balancer not owned by this service")

	// ErrNotFound is returned (wrapped) by UpdateLoadBalancer when the
	// Service has no load balancer, and by EnsureLoadBalancer when the
	// stored ID names a load balancer that does not exist.
	ErrNotFound = errors.New("load balancer not found")
)

// UnsupportedError reports a Service feature the provider cannot build.
// errors.Is(err, ErrUnsupported) is true.
type UnsupportedError struct {
	// Feature is the Capabilities field that is false, e.g. "UDP".
	Feature string
	// Detail names the Service field and value that asked for it.
	Detail string
}

// Error names the Service field, the feature and the Capabilities field.
func (e *UnsupportedError) Error() string {
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
		return fmt.Sprintf("load balancer %q (id %q) found by %s has no ccmkit ownership tags, but service %s (cluster %q service UID %q) already owns load balancer %s (found by its ownership tags): refusing to adopt a second one; expected the annotation to name %s, or no annotation",
			e.Name, e.ID, e.How, e.Want.NamespacedName(), e.Want.Cluster, e.Want.UID, strings.Join(owned, ", "), owned[0])
	}
	got := "no ccmkit ownership tags"
	if e.Got.Cluster != "" || e.Got.UID != "" {
		got = fmt.Sprintf("owned by cluster %q service UID %q (%s)", e.Got.Cluster, e.Got.UID, e.Got.NamespacedName())
	}
	return fmt.Sprintf("load balancer %q (id %q) found by %s is %s; expected cluster %q service UID %q: refusing to touch it",
		e.Name, e.ID, e.How, got, e.Want.Cluster, e.Want.UID)
}

// Is reports whether target is ErrNotOwned.
func (e *OwnershipError) Is(target error) bool { return target == ErrNotOwned }

// errNilService is the error of a call given a nil Service, Desired's and
// the Reconciler's alike: a caller's mistake, reported rather than a panic.
var errNilService = invalidService("service is nil; expected a Service of type LoadBalancer")

func invalidService(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidService}, args...)...)
}
