package conformance

import (
	"errors"
	"fmt"

	cloudprovider "k8s.io/cloud-provider"
)

// methodOwners names, for each provider method the suite calls, the rule
// that owns its working at all: the rule that fails when the method
// answers cloudprovider.NotImplemented. Every other rule that meets that
// answer and fails is reported skipped instead, naming the owner (see
// notImplemented): one mistake, one failing rule.
//
// Upstream takes NotImplemented from an InstancesV2 or LoadBalancer
// method for an error like any other (controllers/nodelifecycle/
// node_lifecycle_controller.go shutdownInCloudProvider returns it from
// InstanceShutdown, and MonitorNodes logs it for every Node on every pass,
// so a stopped instance never gets the shutdown taint); only the legacy
// Instances paths turn it into a default (shutdownInCloudProvider's
// InstanceShutdownByProviderID, controllers/node/node_controller.go
// getInstanceMetadata's InstanceID). GetLoadBalancerName returns no error
// and has no owner.
var methodOwners = map[string]string{
	"GetLoadBalancer":           "LB-GET-EXISTS",
	"EnsureLoadBalancer":        "LB-ENSURE-STATUS",
	"UpdateLoadBalancer":        "LB-BACKENDS",
	"EnsureLoadBalancerDeleted": "LB-DELETE",
	"InstanceExists":            "INST-EXISTS",
	"InstanceShutdown":          "INST-SHUTDOWN",
	"InstanceMetadata":          "INST-METADATA",
	"ListRoutes":                "ROUTE-ROUNDTRIP",
	"CreateRoute":               "ROUTE-ROUNDTRIP",
	"DeleteRoute":               "ROUTE-DELETE",
	"GetZoneByProviderID":       "ZONES-LOOKUP",
	"GetZoneByNodeName":         "ZONES-LOOKUP",
}

// unimplemented is the first cloudprovider.NotImplemented a rule met from
// a method another rule owns.
type unimplemented struct {
	method, owner string
	// direct: from a call of the rule itself, not of a controller.
	direct bool
}

// noteAnswer records err, the answer of the provider method method (called
// by the rule when direct, else by a controller), when it is
// cloudprovider.NotImplemented from a method another rule owns. Safe for
// concurrent use.
func (r *rt) noteAnswer(method string, err error, direct bool) {
	if err == nil || !errors.Is(err, cloudprovider.NotImplemented) {
		return
	}
	owner, ok := methodOwners[method]
	if !ok || owner == r.rl.id {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if direct {
		r.directUnimpl++
	}
	if r.unimpl == nil {
		r.unimpl = &unimplemented{method: method, owner: owner, direct: direct}
	}
}

// directUnimplemented returns how many direct calls of the rule have
// answered cloudprovider.NotImplemented from a method another rule owns.
func (r *rt) directUnimplemented() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.directUnimpl
}

// ownedElsewhere turns res, the result of a rule that failed after the
// provider answered cloudprovider.NotImplemented from a method another rule
// owns, into a skip naming that rule, with the failures kept as notes: the
// owner reports the cause, once. A rule that passed despite the answer (a
// controller that logs it and goes on, as the node lifecycle controller
// does with InstanceShutdown for a running instance) keeps its pass.
func (r *rt) ownedElsewhere(res result) result {
	u := r.unimpl
	if u == nil || len(res.errs) == 0 {
		return res
	}
	by := "a controller's call of "
	if u.direct {
		by = ""
	}
	res.skip = fmt.Sprintf("precondition failed: %s%s returned cloudprovider.NotImplemented: see %s", by, u.method, u.owner)
	for _, e := range res.errs {
		res.logs = append(res.logs, "after that answer, this rule observed: "+e)
	}
	res.errs = nil
	return res
}
