package loadbalancer

import "k8s.io/client-go/tools/record"

// Test access to unexported helpers, for the tests of package
// loadbalancer_test. Nothing here is part of the API.

// NameFits reports whether name is within n's MaxLength and Charset: the
// property every name of NameFor has.
func NameFits(n *Namer, name string) bool {
	if len(name) > n.max {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 128 || !n.allowed[c] {
			return false
		}
	}
	return true
}

// NamerMaxLength is n's maximum name length, its default filled in.
func NamerMaxLength(n *Namer) int { return n.max }

// OwnerTags is o's ownership tags, those of a desired model.
func OwnerTags(o Owner) map[string]string { return o.tags() }

// Canonicalize puts s in canonical order in place.
func Canonicalize(s *Spec) { s.canonicalize() }

// The pieces of Desired and of the Reconciler that the tests call alone.
var (
	BuildStatus     = buildStatus
	ServiceFamilies = serviceFamilies
	SourceRanges    = sourceRanges
)

// The pure pieces of shared backend pools.
var (
	PoolKey     = poolKey
	DesiredPool = desiredPool
	PlanPool    = planPool
)

// Backends is the backends a cloud keyed by k keeps for nodes.
var Backends = BackendKey.backends

// EventReasonBackendSkipped is the reason of the Warning event on a Node
// left out of the backends.
const EventReasonBackendSkipped = eventReasonBackendSkipped

// SetRecorder gives r the event recorder Initialize would start.
func SetRecorder(r *Reconciler, rec record.EventRecorder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recorder = rec
}

// The reasons of the Warning events on a Service.
const (
	EventReasonInvalidAnnotation = eventReasonInvalidAnnotation
	EventReasonInvalidService    = eventReasonInvalidService
	EventReasonUnsupported       = eventReasonUnsupported
	EventReasonNotOwned          = eventReasonNotOwned
	EventReasonNotFound          = eventReasonNotFound
)

// The bounds of the Reconciler's writes on a busy cloud: the writes
// converge allows beyond twice its first plan's actions, and the Delete
// calls for one load balancer.
const (
	ConvergeSpare  = convergeSpare
	MaxDeleteCalls = maxDeleteCalls
)
