package fake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// The admin endpoint's load-balancer edits (see AdminHandler): the
// control surface's CreateLoadBalancer, RemoveListener, RemoveBackend and
// RemoveBackendPoolMember over HTTP.

// postLoadBalancer serves POST /loadbalancers: CreateLoadBalancer.
func (c *Cloud) postLoadBalancer(w http.ResponseWriter, r *http.Request) {
	var body lbBody
	if decodeBody(w, r, &body) {
		out, err := c.createLB(r.Context(), body.lb)
		answerLB(w, http.StatusCreated, out, err)
	}
}

// deleteListener serves DELETE
// /loadbalancers/{id}/listeners/{protocol}/{port}: RemoveListener.
func (c *Cloud) deleteListener(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.ParseInt(r.PathValue("port"), 10, 32)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("port %s: expected a number from 1 to 65535", clip(r.PathValue("port"))))
		return
	}
	if emptyBody(w, r) {
		out, err := c.removeListener(r.Context(), r.PathValue("id"), v1.Protocol(r.PathValue("protocol")), int32(port))
		answerLB(w, http.StatusOK, out, err)
	}
}

// deleteBackend serves DELETE /loadbalancers/{id}/backends/{key}:
// RemoveBackend.
func (c *Cloud) deleteBackend(w http.ResponseWriter, r *http.Request) {
	if key, ok := pathKey(w, r); ok && emptyBody(w, r) {
		out, err := c.removeBackend(r.Context(), r.PathValue("id"), key)
		answerLB(w, http.StatusOK, out, err)
	}
}

// deletePoolMember serves DELETE /backendpools/{id}/backends/{key}:
// RemoveBackendPoolMember.
func (c *Cloud) deletePoolMember(w http.ResponseWriter, r *http.Request) {
	if key, ok := pathKey(w, r); ok && emptyBody(w, r) {
		out, err := c.removePoolMember(r.Context(), r.PathValue("id"), key)
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
// (writeLBError).
func answerLB(w http.ResponseWriter, status int, out any, err error) {
	if err != nil {
		writeLBError(w, err)
		return
	}
	writeJSON(w, status, out)
}

// writeLBError is writeControlError for the load-balancer edits: 400 for
// input they refuse, 404 for a load balancer, listener, backend or backend
// pool that does not exist, and writeControlError's statuses otherwise
// (409 for a VIP pool without a free address, 503 for a state file lock
// not free in time).
func writeLBError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errInvalidLoadBalancer), errors.Is(err, errInvalidListener), errors.Is(err, errInvalidBackend):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, loadbalancer.ErrNotFound), errors.Is(err, errListenerNotFound), errors.Is(err, errBackendNotFound), errors.Is(err, errBackendPoolNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	default:
		writeControlError(w, err)
	}
}

// lbBody is the body of POST /loadbalancers, a loadbalancer.LoadBalancer,
// decoded as strictly as every body (strictJSON). It decodes itself
// because the model's JSON has the fields of an embedded struct
// (Listener's ListenerKey) in the struct that embeds it, where the key
// check of strictJSON, which takes a struct's fields as declared, would
// not find them: it checks the keys against lbShape instead.
type lbBody struct{ lb loadbalancer.LoadBalancer }

// lbShape is loadbalancer.LoadBalancer as its JSON objects are (jsonShape).
var lbShape = jsonShape(reflect.TypeFor[loadbalancer.LoadBalancer]())

// UnmarshalJSON checks the keys of data against lbShape (repeated, in
// another case, unknown: keyChecker) and decodes it, unknown fields
// refused.
func (b *lbBody) UnmarshalJSON(data []byte) error {
	kc := keyChecker{dec: json.NewDecoder(bytes.NewReader(data))}
	if err := kc.value(lbShape, "the body"); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(&b.lb)
}

// jsonShape returns t (not a recursive type) as encoding/json sees its
// objects, for keyChecker: every struct rebuilt (reflect.StructOf) from
// its exported fields, with the fields of an embedded struct that has no
// JSON name in place of that struct, at any depth; a type that decodes
// itself (json.Unmarshaler) and any other type as it is.
func jsonShape(t reflect.Type) reflect.Type {
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return t
	}
	switch t.Kind() {
	case reflect.Pointer:
		return reflect.PointerTo(jsonShape(t.Elem()))
	case reflect.Slice:
		return reflect.SliceOf(jsonShape(t.Elem()))
	case reflect.Map:
		return reflect.MapOf(t.Key(), jsonShape(t.Elem()))
	case reflect.Struct:
		return reflect.StructOf(shapeFields(t))
	}
	return t
}

// shapeFields returns the exported fields of struct t for jsonShape, an
// embedded struct without a JSON name replaced by its own fields.
func shapeFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			out = append(out, shapeFields(f.Type)...)
		case f.IsExported():
			out = append(out, reflect.StructField{Name: f.Name, Type: jsonShape(f.Type), Tag: f.Tag})
		}
	}
	return out
}
