package fake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

// adminMux is the admin API (see AdminHandler)
// without adminGuard. Every store call of a handler is bound by the
// request's context.
func (c *Cloud) adminMux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/state", methods{"GET": c.getState})
	mux.Handle("/instances", methods{"GET": c.getInstances, "POST": c.postInstance})
	mux.Handle("/instances/{id}", methods{"GET": c.getInstance, "DELETE": c.deleteInstance})
	mux.Handle("/instances/{id}/{action}", methods{"POST": c.postInstanceAction})
	mux.Handle("/loadbalancers", methods{"GET": c.getLoadBalancers, "POST": c.postLoadBalancer})
	mux.Handle("/loadbalancers/{id}/listeners/{protocol}/{port}", methods{"DELETE": c.deleteListener})
	mux.Handle("/loadbalancers/{id}/backends/{key}", methods{"DELETE": c.deleteBackend})
	mux.Handle("/backendpools", methods{"GET": c.getBackendPools})
	mux.Handle("/backendpools/{id}/backends/{key}", methods{"DELETE": c.deletePoolMember})
	mux.Handle("/routes", methods{"GET": c.getRoutes})
	mux.Handle("/calls", methods{"GET": c.getCalls})
	mux.Handle("/calls/reset", methods{"POST": c.postCallsReset})
	mux.Handle("/faults", methods{"POST": c.postFault, "DELETE": c.deleteFaults})
	mux.Handle("/ratelimit", methods{"GET": c.getRateLimit, "PUT": c.putRateLimit})
	mux.Handle("/provisioning", methods{"GET": c.getProvisioning, "PUT": c.putProvisioning})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such path %s: expected a path of the admin API (fake.Cloud.AdminHandler)", clip(r.URL.Path)))
	})
	return mux
}

// snapshot reads the state for r, answering 500 when the shared state
// file cannot be read (rather than the state last loaded), 503 when its
// lock was not free before r's deadline.
func (c *Cloud) snapshot(w http.ResponseWriter, r *http.Request) (State, bool) {
	st, err := c.store.snapshot(r.Context(), c.cfg.ClusterID)
	if err != nil {
		writeControlError(w, err)
	}
	return st, err == nil
}

// getState serves GET /state: the whole cloud.
func (c *Cloud) getState(w http.ResponseWriter, r *http.Request) {
	if st, ok := c.snapshot(w, r); ok {
		writeJSON(w, http.StatusOK, st)
	}
}

// getInstances serves GET /instances: every instance.
func (c *Cloud) getInstances(w http.ResponseWriter, r *http.Request) {
	if st, ok := c.snapshot(w, r); ok {
		writeJSON(w, http.StatusOK, st.Instances)
	}
}

// postInstance serves POST /instances: AddInstance.
func (c *Cloud) postInstance(w http.ResponseWriter, r *http.Request) {
	var in Instance
	if !decodeBody(w, r, &in) {
		return
	}
	out, err := c.store.createInstance(r.Context(), in)
	if err != nil {
		writeControlError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// getInstance serves GET /instances/{id}.
func (c *Cloud) getInstance(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	in, ok, err := c.store.instance(r.Context(), id)
	if err != nil {
		writeControlError(w, err)
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("instance %q not found", id))
		return
	}
	writeJSON(w, http.StatusOK, in)
}

// deleteInstance serves DELETE /instances/{id}: the instance is forgotten
// and its addresses freed.
func (c *Cloud) deleteInstance(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok || !emptyBody(w, r) {
		return
	}
	if err := c.store.removeInstance(r.Context(), id); err != nil {
		writeControlError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// instanceActions are the actions of POST /instances/{id}/{action}: those
// of StopInstance, StartInstance and TerminateInstance.
var instanceActions = map[string]instances.State{"stop": instances.StateStopped, "start": instances.StateRunning, "terminate": instances.StateTerminated}

// postInstanceAction serves POST /instances/{id}/{action}.
func (c *Cloud) postInstanceAction(w http.ResponseWriter, r *http.Request) {
	state, ok := instanceActions[r.PathValue("action")]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown instance action %s: expected stop, start or terminate", clip(r.PathValue("action"))))
		return
	}
	id, ok := pathID(w, r)
	if !ok || !emptyBody(w, r) {
		return
	}
	out, err := c.store.setState(r.Context(), id, state)
	if err != nil {
		writeControlError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// getLoadBalancers serves GET /loadbalancers.
func (c *Cloud) getLoadBalancers(w http.ResponseWriter, r *http.Request) {
	if st, ok := c.snapshot(w, r); ok {
		writeJSON(w, http.StatusOK, st.LoadBalancers)
	}
}

// getBackendPools serves GET /backendpools: the shared backend pools, an
// empty list when there are none.
func (c *Cloud) getBackendPools(w http.ResponseWriter, r *http.Request) {
	if st, ok := c.snapshot(w, r); ok {
		pools := st.BackendPools
		if pools == nil {
			pools = []loadbalancer.Pool{}
		}
		writeJSON(w, http.StatusOK, pools)
	}
}

// getRoutes serves GET /routes, those of one cluster with ?cluster=.
func (c *Cloud) getRoutes(w http.ResponseWriter, r *http.Request) {
	st, ok := c.snapshot(w, r)
	if !ok {
		return
	}
	all := st.Routes
	if q := r.URL.Query(); q.Has("cluster") {
		all = slices.DeleteFunc(all, func(rt Route) bool { return rt.Cluster != q.Get("cluster") })
	}
	writeJSON(w, http.StatusOK, all)
}

// getCalls serves GET /calls: the call counters.
func (c *Cloud) getCalls(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, c.Calls())
}

// postCallsReset serves POST /calls/reset: every counter back to zero.
func (c *Cloud) postCallsReset(w http.ResponseWriter, r *http.Request) {
	if !emptyBody(w, r) {
		return
	}
	c.resetCalls()
	w.WriteHeader(http.StatusNoContent)
}

// postFault serves POST /faults: a fault added to the script.
func (c *Cloud) postFault(w http.ResponseWriter, r *http.Request) {
	var req faultRequest
	if !decodeBody(w, r, &req) {
		return
	}
	f, err := req.fault()
	if err == nil {
		err = c.meter.script.add(f)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deleteFaults serves DELETE /faults: every fault removed, and the
// caches' memory of a failed list dropped, so that the provider sees the
// end of an outage at once.
func (c *Cloud) deleteFaults(w http.ResponseWriter, r *http.Request) {
	if !emptyBody(w, r) {
		return
	}
	c.clearFaults()
	w.WriteHeader(http.StatusNoContent)
}

// clearFaults removes every fault of the admin endpoint's script and drops
// the instance and load-balancer caches.
func (c *Cloud) clearFaults() {
	c.meter.script.clear()
	c.dropCaches()
}

// getRateLimit serves GET /ratelimit: the rate limit in force.
func (c *Cloud) getRateLimit(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, c.RateLimit())
}

// putRateLimit serves PUT /ratelimit: setRateLimit.
func (c *Cloud) putRateLimit(w http.ResponseWriter, r *http.Request) {
	var req RateLimit
	if !decodeBody(w, r, &req) {
		return
	}
	if err := c.setRateLimit(req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, c.RateLimit())
}

// provisioningBody is the body of GET /provisioning, and the response to
// PUT /provisioning.
type provisioningBody struct {
	Delay *provider.Duration `json:"delay"`
}

// getProvisioning serves GET /provisioning: the provisioning delay.
func (c *Cloud) getProvisioning(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, provisioningBody{Delay: &provider.Duration{Duration: c.ProvisioningDelay()}})
}

// putProvisioning serves PUT /provisioning: setProvisioningDelay. The
// delay is decoded apart, so that its error names it.
func (c *Cloud) putProvisioning(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Delay json.RawMessage `json:"delay"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	err := errors.New(`delay: expected a duration such as "2s" ("0s": no delay)`)
	if d := bytes.TrimSpace(req.Delay); len(d) > 0 && !bytes.Equal(d, []byte("null")) {
		var delay provider.Duration
		if err = json.Unmarshal(d, &delay); err != nil {
			err = fmt.Errorf("delay: %w", err)
		} else {
			err = c.setProvisioningDelay(delay.Duration)
		}
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	c.getProvisioning(w, r)
}
