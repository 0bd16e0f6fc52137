package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	restclient "k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
)

// serveClientset serves the Kubernetes REST API from kube over HTTP on
// 127.0.0.1 and returns a config for clients of it. Every request becomes
// the client-go testing Action that the fake's typed clients make for the
// same call (gentype/fake.go), run by kube.Invokes or kube.InvokesWatch:
// clients of cfg see the very objects, tracker and reactors that the
// suite's controllers see through kube, and the other way round. Answers
// are JSON whatever the request accepts (client-go decodes by the response
// Content-Type: rest/request.go transformResponse, newStreamWatcher);
// bodies may be JSON, YAML or protobuf. stop cancels every request, which
// ends open watches, and closes the server once they have returned; it may
// be called more than once.
//
// Not served: deletecollection, subresources other than status, watch-list
// (sendInitialEvents is refused with 422, as by a server without the
// WatchList feature, and the reflector falls back to a list then a watch:
// tools/cache/reflector.go ListAndWatchWithContext), field selectors on
// fields other than metadata.name and metadata.namespace (ignored, as the
// fake ignores them), paging (every item in one page) and resourceVersion
// preconditions (the tracker checks none).
func serveClientset(kube *fake.Clientset) (cfg *restclient.Config, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewUnstartedServer(&apiServer{kube})
	srv.Config.BaseContext = func(net.Listener) context.Context { return ctx }
	srv.Start()
	var once sync.Once
	// QPS < 0: no client-side rate limiter (rest/config.go RESTClientFor).
	return &restclient.Config{Host: srv.URL, QPS: -1}, func() { once.Do(func() { cancel(); srv.Close() }) }
}

// apiServer is the http.Handler of serveClientset.
type apiServer struct{ kube *fake.Clientset }

// apiResource is a resource served: its kind, scope and status subresource.
type apiResource struct {
	kind       schema.GroupVersionKind
	namespaced bool
	status     bool
}

// apiIndex is what is served: the resources by group version and name, and
// the named groups for discovery, by name, each with its versions newest
// first.
type apiIndex struct {
	resources map[schema.GroupVersion]map[string]apiResource
	groups    []metav1.APIGroup
}

// clusterScoped lists, by group, the kinds of client-go's scheme whose
// typed client takes no namespace (as kubernetes/typed/core/v1 Nodes());
// TestApiserveScopes checks it against the typed clientset.
var clusterScoped = map[string]string{
	"":                             "ComponentStatus Namespace Node PersistentVolume",
	"admissionregistration.k8s.io": "MutatingAdmissionPolicy MutatingAdmissionPolicyBinding MutatingWebhookConfiguration ValidatingAdmissionPolicy ValidatingAdmissionPolicyBinding ValidatingWebhookConfiguration",
	"certificates.k8s.io":          "CertificateSigningRequest ClusterTrustBundle",
	"flowcontrol.apiserver.k8s.io": "FlowSchema PriorityLevelConfiguration",
	"internal.apiserver.k8s.io":    "StorageVersion",
	"networking.k8s.io":            "IPAddress IngressClass ServiceCIDR",
	"node.k8s.io":                  "RuntimeClass",
	"rbac.authorization.k8s.io":    "ClusterRole ClusterRoleBinding",
	"resource.k8s.io":              "DeviceClass DeviceTaintRule ResourcePoolStatusRequest ResourceSlice",
	"scheduling.k8s.io":            "PriorityClass",
	"storage.k8s.io":               "CSIDriver CSINode StorageClass VolumeAttachment VolumeAttributesClass",
	"storagemigration.k8s.io":      "StorageVersionMigration",
}

// apis indexes every kind of k8s.io/client-go/kubernetes/scheme that has
// object metadata and a List kind, under the resource name the fake's
// tracker files it by (meta.UnsafeGuessKindToResource, as testing/fixture.go
// tracker.Add does), with a status subresource when its type has a Status
// field.
var apis = sync.OnceValue(func() *apiIndex {
	idx := &apiIndex{resources: map[schema.GroupVersion]map[string]apiResource{}}
	known := scheme.Scheme.AllKnownTypes()
	versions := map[string][]string{}
	for gvk, typ := range known {
		gv := gvk.GroupVersion()
		if _, ok := known[gv.WithKind(gvk.Kind+"List")]; !ok || gvk.Version == runtime.APIVersionInternal {
			continue
		}
		if _, err := meta.Accessor(reflect.New(typ).Interface()); err != nil {
			continue
		}
		if idx.resources[gv] == nil {
			idx.resources[gv] = map[string]apiResource{}
			versions[gv.Group] = append(versions[gv.Group], gv.Version)
		}
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		_, status := typ.FieldByName("Status")
		idx.resources[gv][gvr.Resource] = apiResource{gvk, !slices.Contains(strings.Fields(clusterScoped[gv.Group]), gvk.Kind), status}
	}
	delete(versions, "")
	for _, g := range slices.Sorted(maps.Keys(versions)) {
		group := metav1.APIGroup{Name: g}
		for _, v := range slices.SortedFunc(slices.Values(versions[g]), func(a, b string) int { return -version.CompareKubeAwareVersionStrings(a, b) }) {
			group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g + "/" + v, Version: v})
		}
		group.PreferredVersion = group.Versions[0]
		idx.groups = append(idx.groups, group)
	}
	return idx
})

// ServeHTTP answers discovery (/version, /api, /apis, /api/v1, /apis/G,
// /apis/G/V) and the resources of apis under /api/v1 and /apis/G/V.
func (s *apiServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	seg := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	idx, gv, n := apis(), schema.GroupVersion{}, 0
	var doc any
	switch {
	case len(seg) == 1 && seg[0] == "version":
		doc = kubeVersion()
	case len(seg) == 1 && seg[0] == "api":
		doc = &metav1.APIVersions{Versions: []string{"v1"}}
	case len(seg) == 1 && seg[0] == "apis":
		doc = &metav1.APIGroupList{Groups: idx.groups}
	case len(seg) == 2 && seg[0] == "apis":
		if i := slices.IndexFunc(idx.groups, func(g metav1.APIGroup) bool { return g.Name == seg[1] }); i >= 0 {
			doc = &idx.groups[i]
		}
	case len(seg) >= 2 && seg[0] == "api":
		gv, n = schema.GroupVersion{Version: seg[1]}, 2
	case len(seg) >= 3 && seg[0] == "apis":
		gv, n = schema.GroupVersion{Group: seg[1], Version: seg[2]}, 3
	}
	if doc != nil {
		document(w, req, doc)
		return
	}
	resources, ok := idx.resources[gv]
	switch {
	case !ok || n == 0:
		fail(w, notFound(req))
	case len(seg) > n:
		s.serveResource(w, req, gv, seg[n:])
	default:
		list := &metav1.APIResourceList{GroupVersion: gv.String()}
		for _, name := range slices.Sorted(maps.Keys(resources)) {
			r := resources[name]
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: name, SingularName: strings.ToLower(r.kind.Kind), Namespaced: r.namespaced,
				Kind: r.kind.Kind, Verbs: metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}})
			if r.status {
				list.APIResources = append(list.APIResources, metav1.APIResource{Name: name + "/status", Namespaced: r.namespaced, Kind: r.kind.Kind, Verbs: metav1.Verbs{"get", "patch", "update"}})
			}
		}
		document(w, req, list)
	}
}

// document answers a GET of a discovery document with obj.
func document(w http.ResponseWriter, req *http.Request, obj any) {
	if req.Method != http.MethodGet {
		fail(w, statusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "%s %s: expected GET of a discovery document", req.Method, req.URL.Path))
		return
	}
	if o, ok := obj.(runtime.Object); ok {
		obj = stamp(o, metav1.Unversioned)
	}
	writeJSON(w, http.StatusOK, obj)
}

// serveResource serves rest, "[namespaces NS] RESOURCE [NAME [status]]" of
// gv: it runs the Action the fake's typed client makes for the request and
// answers what kube returns.
func (s *apiServer) serveResource(w http.ResponseWriter, req *http.Request, gv schema.GroupVersion, rest []string) {
	resources, ns := apis().resources[gv], ""
	if _, ok := resources[at(rest, 2)]; ok && rest[0] == "namespaces" {
		ns, rest = rest[1], rest[2:]
	}
	res, ok := resources[rest[0]]
	gvr, name, sub := gv.WithResource(rest[0]), at(rest, 1), at(rest, 2)
	switch {
	case !ok || len(rest) > 3 || ns != "" && !res.namespaced || sub != "" && (sub != "status" || !res.status):
		fail(w, notFound(req))
	case res.namespaced && ns == "" && (name != "" || req.Method != http.MethodGet):
		fail(w, statusError(http.StatusNotFound, metav1.StatusReasonNotFound, "%s %s: %s are namespaced, expected /namespaces/NAMESPACE/%s", req.Method, req.URL.Path, gvr.Resource, gvr.Resource))
	case req.Method == http.MethodGet && name == "":
		s.collection(w, req, res, gvr, ns)
	default:
		def, _ := scheme.Scheme.New(res.kind)
		action, err := translate(req, res, gvr, ns, name, sub)
		var obj runtime.Object
		if err == nil {
			obj, err = s.kube.Invokes(action, def)
		}
		if pa, ok := action.(clienttesting.PatchActionImpl); ok && err != nil && !errors.As(err, new(apierrors.APIStatus)) {
			err = apierrors.NewBadRequest(fmt.Sprintf("applying the %s patch to %s %q: %v", pa.GetPatchType(), gvr.Resource, name, err))
		}
		switch {
		case err != nil:
			fail(w, err)
		case req.Method == http.MethodDelete:
			writeJSON(w, http.StatusOK, stamp(&metav1.Status{Status: metav1.StatusSuccess}, metav1.Unversioned))
		case req.Method == http.MethodPost:
			writeJSON(w, http.StatusCreated, stamp(orDefault(obj, def), gv))
		default:
			writeJSON(w, http.StatusOK, stamp(orDefault(obj, def), gv))
		}
	}
}

// translate returns the Action for a request by name (GET, PUT, PATCH,
// DELETE) or a POST to a collection, as gentype/fake.go builds it.
func translate(req *http.Request, res apiResource, gvr schema.GroupVersionResource, ns, name, sub string) (clienttesting.Action, error) {
	switch {
	case req.Method == http.MethodGet:
		opts, err := query[metav1.GetOptions](req)
		return clienttesting.NewGetSubresourceActionWithOptions(gvr, ns, sub, name, opts), err
	case req.Method == http.MethodPost && name == "":
		opts, err := query[metav1.CreateOptions](req)
		if err != nil {
			return nil, err
		}
		obj, err := decodeBody(req, res.kind, "")
		return clienttesting.NewCreateActionWithOptions(gvr, ns, obj, opts), err
	case req.Method == http.MethodPut && name != "":
		opts, err := query[metav1.UpdateOptions](req)
		if err != nil {
			return nil, err
		}
		obj, err := decodeBody(req, res.kind, name)
		return clienttesting.NewUpdateSubresourceActionWithOptions(gvr, sub, ns, obj, opts), err
	case req.Method == http.MethodPatch && name != "":
		pt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
		if !slices.Contains([]types.PatchType{types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyPatchType}, types.PatchType(pt)) {
			return nil, statusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType, "patch Content-Type %q: expected %s, %s, %s or %s",
				pt, types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyPatchType)
		}
		opts, err := query[metav1.PatchOptions](req)
		if err != nil {
			return nil, err
		}
		patch, err := io.ReadAll(req.Body)
		return clienttesting.NewPatchSubresourceActionWithOptions(gvr, ns, name, types.PatchType(pt), patch, opts, sub), err
	case req.Method == http.MethodDelete && name != "" && sub == "":
		opts, err := query[metav1.DeleteOptions](req) // a body, as client-go sends, takes precedence
		if body, _ := io.ReadAll(req.Body); err == nil && len(body) > 0 {
			if _, _, err = scheme.Codecs.UniversalDeserializer().Decode(body, nil, &opts); err != nil {
				err = apierrors.NewBadRequest(fmt.Sprintf("decoding the request body: %v: expected DeleteOptions", err))
			}
		}
		return clienttesting.NewDeleteActionWithOptions(gvr, ns, name, opts), err
	}
	return nil, statusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "%s %s: expected GET, POST (to a collection), PUT, PATCH or DELETE (by name)", req.Method, req.URL.Path)
}

// collection serves a list or, with watch=true, a watch of gvr in ns (all
// namespaces if "").
func (s *apiServer) collection(w http.ResponseWriter, req *http.Request, res apiResource, gvr schema.GroupVersionResource, ns string) {
	opts, err := query[metav1.ListOptions](req)
	var match func(runtime.Object) bool
	if err == nil {
		match, err = selects(opts)
	}
	switch {
	case err != nil:
		fail(w, err)
	case opts.Watch && opts.SendInitialEvents != nil && *opts.SendInitialEvents:
		fail(w, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", field.ErrorList{field.Forbidden(field.NewPath("sendInitialEvents"),
			"watch-list is not served over the fake clientset, expected a list then a watch from its resourceVersion")}))
	case opts.Watch:
		s.watch(w, req, clienttesting.NewWatchActionWithOptions(gvr, ns, opts), match)
	default:
		def, _ := scheme.Scheme.New(gvr.GroupVersion().WithKind(res.kind.Kind + "List"))
		obj, err := s.kube.Invokes(clienttesting.NewListActionWithOptions(gvr, res.kind, ns, opts), def)
		var list runtime.Object
		var items []runtime.Object
		if err == nil {
			list = stamp(orDefault(obj, def), gvr.GroupVersion())
			items, err = meta.ExtractList(list)
		}
		if err == nil { // keep what the fake's typed List keeps (gentype/fake.go alsoFakeLister.List)
			err = meta.SetList(list, slices.DeleteFunc(items, func(o runtime.Object) bool { return !match(o) }))
		}
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, list)
	}
}

// watch streams the events of kube's watch for action as JSON
// metav1.WatchEvents, flushed one by one, as client-go reads them
// (rest/watch/decoder.go), until the client goes, the watch ends, its
// timeoutSeconds pass or the server stops.
func (s *apiServer) watch(w http.ResponseWriter, req *http.Request, action clienttesting.WatchActionImpl, match func(runtime.Object) bool) {
	wi, err := s.kube.InvokesWatch(action)
	if err != nil {
		fail(w, err)
		return
	}
	done := make(chan struct{})
	events := relay(wi.ResultChan(), done)
	defer func() {
		wi.Stop()
		close(done)
		for range events { // until relay has returned
		}
	}()
	ctx := req.Context()
	if t := action.ListOptions.TimeoutSeconds; t != nil && *t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*t)*time.Second)
		defer cancel()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	flush, enc := http.NewResponseController(w).Flush, json.NewEncoder(w)
	if flush() != nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Type != watch.Error && ev.Type != watch.Bookmark && !match(ev.Object) {
				continue
			}
			raw, err := json.Marshal(stamp(ev.Object, action.Resource.GroupVersion()))
			if err != nil || enc.Encode(&metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: raw}}) != nil || flush() != nil {
				return
			}
		}
	}
}

// relay forwards the events of in through an unbounded queue, so that in
// never fills: the fake's watchers panic when 100 events are unread
// (apimachinery pkg/watch/watch.go RaceFreeFakeWatcher.Add), and a client
// may read slower than the suite writes. The returned channel closes once
// in has closed and its events are forwarded, or done is closed.
func relay(in <-chan watch.Event, done <-chan struct{}) <-chan watch.Event {
	out := make(chan watch.Event)
	go func() {
		defer close(out)
		var queue []watch.Event
		for in != nil || len(queue) > 0 {
			var send chan<- watch.Event
			if len(queue) > 0 {
				send = out
			}
			select {
			case ev, ok := <-in:
				if !ok {
					in = nil
				} else if ev.Object != nil {
					queue = append(queue, ev)
				}
			case send <- at(queue, 0):
				queue = queue[1:]
			case <-done:
				return
			}
		}
	}()
	return out
}

// selects returns which objects a list or watch with opts keeps: those
// whose labels match LabelSelector (as the fake's typed List keeps; its
// tracker ignores selectors) and, when FieldSelector is only on
// metadata.name and metadata.namespace, whose name and namespace match it
// (other field selectors are left to the reactors, which ignore them). A
// selector that does not parse is a BadRequest, before
// clienttesting.ExtractFromListOptions would panic on it.
func selects(opts metav1.ListOptions) (func(runtime.Object) bool, error) {
	ls, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("labelSelector %q: %v: expected a label selector such as a=b,c!=d", opts.LabelSelector, err))
	}
	fs, err := fields.ParseSelector(opts.FieldSelector)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("fieldSelector %q: %v: expected a field selector such as metadata.name=a", opts.FieldSelector, err))
	}
	byMeta := !slices.ContainsFunc(fs.Requirements(), func(r fields.Requirement) bool { return r.Field != "metadata.name" && r.Field != "metadata.namespace" })
	return func(obj runtime.Object) bool {
		m, err := meta.Accessor(obj)
		return err != nil || ls.Matches(labels.Set(m.GetLabels())) && (!byMeta || fs.Matches(fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}))
	}, nil
}

// query decodes req's query parameters into a T, a metav1 options type,
// with the url.Values conversions that metav1.AddToGroupVersion registers
// in client-go's scheme for v1 (the client encodes them so: rest/request.go
// VersionedParams).
func query[T any, P interface {
	*T
	runtime.Object
}](req *http.Request) (T, error) {
	var opts T
	if err := scheme.ParameterCodec.DecodeParameters(req.URL.Query(), metav1.Unversioned, P(&opts)); err != nil {
		return opts, apierrors.NewBadRequest(fmt.Sprintf("query %q: %v: expected the parameters of %T", req.URL.RawQuery, err, opts))
	}
	return opts, nil
}

// decodeBody decodes req's body, a want named name if name is not "" (JSON,
// YAML or protobuf, told apart by their content:
// runtime/serializer CodecFactory.UniversalDeserializer).
func decodeBody(req *http.Request, want schema.GroupVersionKind, name string) (runtime.Object, error) {
	into, _ := scheme.Scheme.New(want)
	body, err := io.ReadAll(req.Body)
	obj, got := runtime.Object(nil), &want
	if err == nil {
		obj, got, err = scheme.Codecs.UniversalDeserializer().Decode(body, &want, into)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding the request body: %v: expected a %s (%s) as JSON, YAML or protobuf", err, want.Kind, want.GroupVersion()))
	}
	if *got != want {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the request body is a %s (%s), expected a %s (%s)", got.Kind, got.GroupVersion(), want.Kind, want.GroupVersion()))
	}
	if m, _ := meta.Accessor(obj); name != "" && m.GetName() != name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%q) does not match the name on the URL (%q), expected the same", m.GetName(), name))
	}
	return obj, nil
}

// fail answers err as a Status: the API status err wraps (a reactor's
// apierrors keep their code and reason), else an InternalError.
func fail(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.Status = metav1.StatusFailure
	if status.Code == 0 {
		status.Code = http.StatusInternalServerError
	}
	writeJSON(w, int(status.Code), stamp(&status, metav1.Unversioned))
}

// notFound is the 404 of a path the server does not serve.
func notFound(req *http.Request) error {
	return statusError(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource: %s %s: expected /version, /api, /apis, "+
		"or /api/v1/..., /apis/GROUP/VERSION/... of a kind of k8s.io/client-go/kubernetes/scheme", req.Method, req.URL.Path)
}

// statusError returns a failure Status with code, reason and the message.
func statusError(code int32, reason metav1.StatusReason, format string, args ...any) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: fmt.Sprintf(format, args...)}}
}

// stamp returns a copy of obj with its apiVersion and kind set, as the API
// server sends them: its kind in gv if it has one there.
func stamp(obj runtime.Object, gv schema.GroupVersion) runtime.Object {
	obj = obj.DeepCopyObject()
	if gvks, _, err := scheme.Scheme.ObjectKinds(obj); err == nil {
		i := slices.IndexFunc(gvks, func(k schema.GroupVersionKind) bool { return k.GroupVersion() == gv })
		obj.GetObjectKind().SetGroupVersionKind(gvks[max(i, 0)])
	}
	return obj
}

// writeJSON answers code with obj as JSON.
func writeJSON(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(obj)
}

// kubeVersion is /version: the Kubernetes release of the client-go linked
// in (client-go v0.Y.Z comes with Kubernetes v1.Y.Z).
func kubeVersion() *version.Info {
	v := "v1.0.0"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i := slices.IndexFunc(bi.Deps, func(m *debug.Module) bool { return m.Path == "k8s.io/client-go" }); i >= 0 && strings.HasPrefix(bi.Deps[i].Version, "v0.") {
			v = "v1." + strings.TrimPrefix(bi.Deps[i].Version, "v0.")
		}
	}
	return &version.Info{Major: "1", Minor: strings.Split(v, ".")[1], GitVersion: v, GoVersion: goruntime.Version(), Compiler: goruntime.Compiler, Platform: goruntime.GOOS + "/" + goruntime.GOARCH}
}

// at returns s[i], or the zero value past its end.
func at[T any](s []T, i int) (v T) {
	if i < len(s) {
		v = s[i]
	}
	return v
}

// orDefault returns obj, or def when a reactor returned no object (the
// fake's typed clients then return their empty result: gentype/fake.go).
func orDefault(obj, def runtime.Object) runtime.Object {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return def
	}
	return obj
}
