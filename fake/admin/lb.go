package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// The admin endpoint's load-balancer edits (see Handler): the
// control surface's CreateLoadBalancer, RemoveListener, RemoveBackend and
// RemoveBackendPoolMember over HTTP.

// postLoadBalancer serves POST /loadbalancers: CreateLoadBalancer.
func (a api) postLoadBalancer(w http.ResponseWriter, r *http.Request) {
	var lb loadbalancer.LoadBalancer
	if decodeBody(w, r, &lb) {
		out, err := a.c.CreateLoadBalancerContext(r.Context(), lb)
		answerLB(w, http.StatusCreated, out, err)
	}
}

// deleteListener serves DELETE
// /loadbalancers/{id}/listeners/{protocol}/{port}: RemoveListener.
func (a api) deleteListener(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.ParseInt(r.PathValue("port"), 10, 32)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("port %s: expected a number from 1 to 65535", clip(r.PathValue("port"))))
		return
	}
	if emptyBody(w, r) {
		out, err := a.c.RemoveListenerContext(r.Context(), r.PathValue("id"), v1.Protocol(r.PathValue("protocol")), int32(port))
		answerLB(w, http.StatusOK, out, err)
	}
}

// deleteBackend serves DELETE /loadbalancers/{id}/backends/{key}:
// RemoveBackend.
func (a api) deleteBackend(w http.ResponseWriter, r *http.Request) {
	if key, ok := pathKey(w, r); ok && emptyBody(w, r) {
		out, err := a.c.RemoveBackendContext(r.Context(), r.PathValue("id"), key)
		answerLB(w, http.StatusOK, out, err)
	}
}

// deletePoolMember serves DELETE /backendpools/{id}/backends/{key}:
// RemoveBackendPoolMember.
func (a api) deletePoolMember(w http.ResponseWriter, r *http.Request) {
	if key, ok := pathKey(w, r); ok && emptyBody(w, r) {
		out, err := a.c.RemoveBackendPoolMemberContext(r.Context(), r.PathValue("id"), key)
		answerLB(w, http.StatusOK, out, err)
	}
}

// pathKey returns the backend key of r's path: its {key}, path-unescaped
// once more, since the key itself is sent path-escaped (url.PathEscape):
// a provider ID "fake://i-3" is the segment "fake:%2F%2Fi-3", which the
// URL escapes again ("fake:%252F%252Fi-3") because adminGuard refuses a
// percent-encoded '/' in the path. It writes 400 and returns false when
// {key} does not unescape.
func pathKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	key, err := url.PathUnescape(r.PathValue("key"))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("backend key %s: expected the key path-escaped (url.PathEscape), then escaped as a path segment (fake://i-3 is fake:%%252F%%252Fi-3 in the URL): %v", clip(r.PathValue("key")), err))
		return "", false
	}
	return key, true
}

// answerLB writes out with status, or the error response for err
// (writeControlError).
func answerLB(w http.ResponseWriter, status int, out any, err error) {
	if err != nil {
		writeControlError(w, err)
		return
	}
	writeJSON(w, status, out)
}
