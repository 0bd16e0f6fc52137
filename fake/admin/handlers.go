package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

// api serves the admin API of one Cloud (see Handler).
type api struct{ c *fake.Cloud }

// mux is the admin API (see Handler) without adminGuard. Every call of a
// handler on the Cloud is bound by the request's context.
func (a api) mux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/state", methods{"GET": a.getState})
	mux.Handle("/instances", methods{"GET": a.getInstances, "POST": a.postInstance})
	mux.Handle("/instances/{id}", methods{"GET": a.getInstance, "DELETE": a.deleteInstance})
	mux.Handle("/instances/{id}/{action}", methods{"POST": a.postInstanceAction})
	mux.Handle("/loadbalancers", methods{"GET": a.getLoadBalancers, "POST": a.postLoadBalancer})
	mux.Handle("/loadbalancers/{id}/listeners/{protocol}/{port}", methods{"DELETE": a.deleteListener})
	mux.Handle("/loadbalancers/{id}/backends/{key}", methods{"DELETE": a.deleteBackend})
	mux.Handle("/backendpools", methods{"GET": a.getBackendPools})
	mux.Handle("/backendpools/{id}/backends/{key}", methods{"DELETE": a.deletePoolMember})
	mux.Handle("/routes", methods{"GET": a.getRoutes})
	mux.Handle("/calls", methods{"GET": a.getCalls})
	mux.Handle("/calls/reset", methods{"POST": a.postCallsReset})
	mux.Handle("/faults", methods{"POST": a.postFault, "DELETE": a.deleteFaults})
	mux.Handle("/ratelimit", methods{"GET": a.getRateLimit, "PUT": a.putRateLimit})
	mux.Handle("/provisioning", methods{"GET": a.getProvisioning, "PUT": a.putProvisioning})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such path %s: expected a path of the admin API (admin.Handler)", clip(r.URL.Path)))
	})
	return mux
}

// snapshot reads the state for r, answering 500 when the shared state
// file cannot be read (rather than the state last loaded), 503 when its
// lock was not free before r's deadline.
func (a api) snapshot(w http.ResponseWriter, r *http.Request) (fake.State, bool) {
	st, err := a.c.SnapshotContext(r.Context())
	if err != nil {
		writeControlError(w, err)
	}
	return st, err == nil
}

// getState serves GET /state: the whole cloud.
func (a api) getState(w http.ResponseWriter, r *http.Request) {
	if st, ok := a.snapshot(w, r); ok {
		writeJSON(w, http.StatusOK, st)
	}
}

// getInstances serves GET /instances: every instance.
func (a api) getInstances(w http.ResponseWriter, r *http.Request) {
	if st, ok := a.snapshot(w, r); ok {
		writeJSON(w, http.StatusOK, st.Instances)
	}
}

// postInstance serves POST /instances: AddInstance.
func (a api) postInstance(w http.ResponseWriter, r *http.Request) {
	var in fake.Instance
	if !decodeBody(w, r, &in) {
		return
	}
	out, err := a.c.AddInstanceContext(r.Context(), in)
	if err != nil {
		writeControlError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// getInstance serves GET /instances/{id}.
func (a api) getInstance(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	in, ok, err := a.c.InstanceByIDContext(r.Context(), id)
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
func (a api) deleteInstance(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok || !emptyBody(w, r) {
		return
	}
	if err := a.c.RemoveInstanceContext(r.Context(), id); err != nil {
		writeControlError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// instanceActions are the actions of POST /instances/{id}/{action}: those
// of StopInstance, StartInstance and TerminateInstance.
var instanceActions = map[string]instances.State{"stop": instances.StateStopped, "start": instances.StateRunning, "terminate": instances.StateTerminated}

// postInstanceAction serves POST /instances/{id}/{action}.
func (a api) postInstanceAction(w http.ResponseWriter, r *http.Request) {
	state, ok := instanceActions[r.PathValue("action")]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown instance action %s: expected stop, start or terminate", clip(r.PathValue("action"))))
		return
	}
	id, ok := pathID(w, r)
	if !ok || !emptyBody(w, r) {
		return
	}
	out, err := a.c.SetInstanceStateContext(r.Context(), id, state)
	if err != nil {
		writeControlError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// getLoadBalancers serves GET /loadbalancers.
func (a api) getLoadBalancers(w http.ResponseWriter, r *http.Request) {
	if st, ok := a.snapshot(w, r); ok {
		writeJSON(w, http.StatusOK, st.LoadBalancers)
	}
}

// getBackendPools serves GET /backendpools: the shared backend pools, an
// empty list when there are none.
func (a api) getBackendPools(w http.ResponseWriter, r *http.Request) {
	if st, ok := a.snapshot(w, r); ok {
		pools := st.BackendPools
		if pools == nil {
			pools = []loadbalancer.Pool{}
		}
		writeJSON(w, http.StatusOK, pools)
	}
}

// getRoutes serves GET /routes, those of one cluster with ?cluster=.
func (a api) getRoutes(w http.ResponseWriter, r *http.Request) {
	st, ok := a.snapshot(w, r)
	if !ok {
		return
	}
	all := st.Routes
	if q := r.URL.Query(); q.Has("cluster") {
		all = slices.DeleteFunc(all, func(rt fake.Route) bool { return rt.Cluster != q.Get("cluster") })
	}
	writeJSON(w, http.StatusOK, all)
}

// getCalls serves GET /calls: the call counters.
func (a api) getCalls(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.c.Calls())
}

// postCallsReset serves POST /calls/reset: every counter back to zero.
func (a api) postCallsReset(w http.ResponseWriter, r *http.Request) {
	if !emptyBody(w, r) {
		return
	}
	a.c.ResetCalls()
	w.WriteHeader(http.StatusNoContent)
}

// postFault serves POST /faults: a fault added to the script.
func (a api) postFault(w http.ResponseWriter, r *http.Request) {
	var req faultRequest
	if !decodeBody(w, r, &req) {
		return
	}
	f, err := req.fault()
	if err == nil {
		err = a.c.AddFault(f)
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
func (a api) deleteFaults(w http.ResponseWriter, r *http.Request) {
	if !emptyBody(w, r) {
		return
	}
	a.c.ClearFaults()
	w.WriteHeader(http.StatusNoContent)
}

// getRateLimit serves GET /ratelimit: the rate limit in force.
func (a api) getRateLimit(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.c.RateLimit())
}

// putRateLimit serves PUT /ratelimit: SetRateLimit.
func (a api) putRateLimit(w http.ResponseWriter, r *http.Request) {
	var req fake.RateLimit
	if !decodeBody(w, r, &req) {
		return
	}
	if err := a.c.SetRateLimit(req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, a.c.RateLimit())
}

// provisioningBody is the body of GET /provisioning, and the response to
// PUT /provisioning.
type provisioningBody struct {
	Delay *provider.Duration `json:"delay"`
}

// getProvisioning serves GET /provisioning: the provisioning delay.
func (a api) getProvisioning(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, provisioningBody{Delay: &provider.Duration{Duration: a.c.ProvisioningDelay()}})
}

// putProvisioning serves PUT /provisioning: SetProvisioningDelay. The
// delay is decoded apart, so that its error names it.
func (a api) putProvisioning(w http.ResponseWriter, r *http.Request) {
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
			err = a.c.SetProvisioningDelay(delay.Duration)
		}
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	a.getProvisioning(w, r)
}

// faultRequest is the body of POST /faults.
type faultRequest struct {
	Op           fake.Op `json:"op"`
	Times        int     `json:"times"`
	Error        string  `json:"error"`
	RetryAfter   string  `json:"retryAfter"`
	LostResponse bool    `json:"lostResponse"`
}

// fault returns the fault req asks for, or an error naming a retryAfter
// that is not a positive duration.
func (req faultRequest) fault() (fake.Fault, error) {
	f := fake.Fault{Op: req.Op, Times: req.Times, LostResponse: req.LostResponse}
	if req.Error != "" {
		f.Err = fmt.Errorf("%w: %s", fake.ErrInjected, req.Error)
	}
	if req.RetryAfter != "" {
		d, err := time.ParseDuration(req.RetryAfter)
		if err != nil || d <= 0 {
			return fake.Fault{}, fmt.Errorf("retryAfter %q: expected a positive Go duration such as \"5s\"", req.RetryAfter)
		}
		f.RetryAfter = d
	}
	return f, nil
}
