package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
)

// served starts serveClientset over a fake clientset holding objs, stopped
// when t ends.
func served(t *testing.T, objs ...k8sruntime.Object) (*fake.Clientset, *restclient.Config) {
	t.Helper()
	kube := fake.NewClientset(objs...)
	cfg, stop := serveClientset(kube)
	t.Cleanup(stop)
	return kube, cfg
}

// poll reports whether cond held within 10s, asking every 10ms (what
// cond waits for runs on real goroutines and sockets, outside any
// synctest bubble).
func poll(ctx context.Context, cond func() bool) bool {
	return wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}) == nil
}

// eventually fails t unless cond holds within 10s (poll).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll(t.Context(), cond) {
		t.Fatalf("after 10s: expected %s", what)
	}
}

// settled waits until the goroutines number at most base, and fails with
// their stacks if they do not within 10s.
func settled(t *testing.T, base int) {
	t.Helper()
	if !poll(context.Background(), func() bool { return runtime.NumGoroutine() <= base }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after stop, expected at most %d as before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
	}
}

// TestServeCRUD makes a round trip of typed calls over HTTP, as JSON and as
// protobuf, and checks each result through the fake clientset.
func TestServeCRUD(t *testing.T) {
	for _, ct := range []string{"application/json", "application/vnd.kubernetes.protobuf", ""} {
		t.Run(strings.ReplaceAll(ct+"default", "/", "-"), func(t *testing.T) {
			ctx := t.Context()
			kube, cfg := served(t, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0"}})
			cfg.ContentType = ct
			cs := clientset.NewForConfigOrDie(cfg)

			// Nodes: cluster-scoped.
			if _, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"role": "a"}}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create node: %v", err)
			}
			if _, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
				t.Errorf("create node again: %v, expected AlreadyExists", err)
			}
			nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil || len(nodes.Items) != 2 {
				t.Fatalf("list nodes: %v, %v; expected n0 and n1", nodes, err)
			}
			if sel, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "role=a"}); err != nil || len(sel.Items) != 1 || sel.Items[0].Name != "n1" {
				t.Errorf("list nodes role=a: %v, %v; expected n1 alone", sel, err)
			}
			if sel, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=n0"}); err != nil || len(sel.Items) != 1 || sel.Items[0].Name != "n0" {
				t.Errorf("list nodes metadata.name=n0: %v, %v; expected n0 alone", sel, err)
			}
			n1, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get node: %v", err)
			}
			n1.Spec.ProviderID = "cloud://n1"
			if _, err := cs.CoreV1().Nodes().Update(ctx, n1, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("update node: %v", err)
			}
			if got, err := kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); err != nil || got.Spec.ProviderID != "cloud://n1" {
				t.Errorf("fake's node after update: %v, %v; expected providerID cloud://n1", got, err)
			}
			if err := cs.CoreV1().Nodes().Delete(ctx, "n0", metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete node: %v", err)
			}
			if _, err := kube.CoreV1().Nodes().Get(ctx, "n0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("fake's n0 after delete: %v, expected NotFound", err)
			}

			// Services: status and a strategic merge patch.
			svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer,
				Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
			if svc, err = cs.CoreV1().Services("ns").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create service: %v", err)
			}
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.1"}}
			if _, err := cs.CoreV1().Services("ns").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("update service status: %v", err)
			}
			patch := `{"metadata":{"finalizers":["service.kubernetes.io/load-balancer-cleanup"]},"spec":{"ports":[{"name":"https","port":443}]}}`
			if _, err := cs.CoreV1().Services("ns").Patch(ctx, "s", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatalf("strategic merge patch of service: %v", err)
			}
			got, err := kube.CoreV1().Services("ns").Get(ctx, "s", metav1.GetOptions{})
			if err != nil || len(got.Status.LoadBalancer.Ingress) != 1 || len(got.Spec.Ports) != 2 || len(got.Finalizers) != 1 {
				t.Errorf("fake's service: %v, %v; expected the ingress IP, ports http and https (merged by name) and the finalizer", got, err)
			}

			// ConfigMaps: a namespace, all namespaces, json, merge and apply patches.
			for _, ns := range []string{"a", "b"} {
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"k": ns}}, metav1.CreateOptions{}); err != nil {
					t.Fatalf("create configmap in %s: %v", ns, err)
				}
			}
			if l, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 2 {
				t.Errorf("list configmaps in all namespaces: %v, %v; expected a/c and b/c", l, err)
			}
			if l, err := cs.CoreV1().ConfigMaps("a").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 || l.Items[0].Namespace != "a" {
				t.Errorf("list configmaps in a: %v, %v; expected a/c", l, err)
			}
			if _, err := cs.CoreV1().ConfigMaps("a").Patch(ctx, "c", types.JSONPatchType, []byte(`[{"op":"add","path":"/data/j","value":"1"}]`), metav1.PatchOptions{}); err != nil {
				t.Errorf("json patch: %v", err)
			}
			if _, err := cs.CoreV1().ConfigMaps("a").Patch(ctx, "c", types.MergePatchType, []byte(`{"data":{"m":"1"}}`), metav1.PatchOptions{}); err != nil {
				t.Errorf("merge patch: %v", err)
			}
			if _, err := cs.CoreV1().ConfigMaps("a").Apply(ctx, corev1apply.ConfigMap("c", "a").WithData(map[string]string{"k": "a", "s": "1"}), metav1.ApplyOptions{FieldManager: "test"}); err != nil {
				t.Errorf("apply: %v", err)
			}
			if cm, err := kube.CoreV1().ConfigMaps("a").Get(ctx, "c", metav1.GetOptions{}); err != nil || cm.Data["j"] != "1" || cm.Data["m"] != "1" || cm.Data["s"] != "1" {
				t.Errorf("fake's configmap a/c: %v, %v; expected data j, m and s from the patches", cm, err)
			}
			if err := cs.CoreV1().ConfigMaps("b").Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete configmap: %v", err)
			}
			if _, err := cs.CoreV1().ConfigMaps("b").Get(ctx, "c", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("get deleted configmap: %v, expected NotFound", err)
			}
		})
	}
}

// TestServeErrors checks the Status of each failure: the reactors' own
// errors keep their code, and the server's name what was expected.
func TestServeErrors(t *testing.T) {
	ctx := t.Context()
	kube, cfg := served(t)
	kube.PrependReactor("update", "configmaps", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "c", fmt.Errorf("stale"))
	})
	kube.PrependReactor("create", "secrets", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "s", nil)
	})
	cs := clientset.NewForConfigOrDie(cfg)
	if _, err := cs.CoreV1().Nodes().Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get missing node: %v, expected NotFound", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("a").Update(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update with a Conflict reactor: %v, expected Conflict", err)
	}
	if _, err := cs.CoreV1().Secrets("a").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("create with an Invalid reactor: %v, expected Invalid", err)
	}
	if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "a in ("}); !apierrors.IsBadRequest(err) {
		t.Errorf("list with a bad label selector: %v, expected BadRequest", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("a").Patch(ctx, "nope", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("patch of a missing configmap: %v, expected NotFound", err)
	}
	for _, tc := range []struct {
		method, path, contentType, body string
		code                            int
		message                         string
	}{
		{"GET", "/api/v1/widgets", "", "", 404, "GET /api/v1/widgets"},
		{"GET", "/apis/nope.example.com/v1", "", "", 404, "/apis/nope.example.com/v1"},
		{"GET", "/apis/apps/v1/namespaces/a/deployments/d/scale", "", "", 404, "/scale"},
		{"GET", "/api/v1/namespaces/a/nodes", "", "", 404, "could not find"},
		{"GET", "/api/v1/configmaps/c", "", "", 404, "expected /namespaces/NAMESPACE/configmaps"},
		{"POST", "/api/v1/namespaces/a/configmaps", "application/json", "{not json", 400, "expected a ConfigMap (v1)"},
		{"POST", "/api/v1/namespaces/a/configmaps", "application/json", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`, 400, "is a Secret (v1), expected a ConfigMap (v1)"},
		{"PUT", "/api/v1/nodes/n", "application/json", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"m"}}`, 400, "does not match the name on the URL"},
		{"PATCH", "/api/v1/nodes/n", "text/plain", `{}`, 415, "expected application/json-patch+json"},
		{"DELETE", "/api/v1/nodes", "", "", 405, "expected GET, POST (to a collection)"},
		{"POST", "/api", "", "", 405, "expected GET of a discovery document"},
		{"GET", "/api/v1/nodes?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", "", "", 422, "watch-list is not served"},
	} {
		req, _ := http.NewRequestWithContext(ctx, tc.method, cfg.Host+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.contentType)
		req.Header.Set("Accept", "application/vnd.kubernetes.protobuf")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		var status metav1.Status
		err = json.NewDecoder(resp.Body).Decode(&status)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.code || int(status.Code) != tc.code || status.Kind != "Status" || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(status.Message, tc.message) {
			t.Errorf("%s %s: %d %s %+v (%v), expected a JSON Status %d with a message containing %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), status, err, tc.code, tc.message)
		}
	}
}

// TestServeInformers checks that a ListWatch over the RESTClient, as the GCE
// provider starts in Initialize, and a typed informer factory over the
// served config list, sync and see what is done through the fake.
func TestServeInformers(t *testing.T) {
	ctx := t.Context()
	kube, cfg := served(t, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "kube-system"}})
	cs := clientset.NewForConfigOrDie(cfg)

	var mu sync.Mutex
	seen := map[string]string{} // name → last event
	record := func(ev string) func(any) {
		return func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			mu.Lock()
			defer mu.Unlock()
			cm := obj.(*v1.ConfigMap)
			seen[cm.Name] = ev + " " + cm.Data["k"]
		}
	}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", "kube-system", fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, &v1.ConfigMap{}, 0, cache.Indexers{})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record("add"), UpdateFunc: func(_, obj any) { record("update")(obj) }, DeleteFunc: record("delete")}); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	nodes := factory.Core().V1().Nodes().Informer()
	stop := make(chan struct{})
	defer func() { close(stop); factory.Shutdown() }()
	go inf.Run(stop)
	factory.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced, nodes.HasSynced) {
		t.Fatal("informers did not sync")
	}
	state := func(name string) string { mu.Lock(); defer mu.Unlock(); return seen[name] }
	eventually(t, "the listed configmap old added", func() bool { return state("old") == "add " })

	cms := kube.CoreV1().ConfigMaps("kube-system")
	if _, err := cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new"}, Data: map[string]string{"k": "1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "configmap new added", func() bool { return state("new") == "add 1" })
	if _, err := cms.Update(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "kube-system"}, Data: map[string]string{"k": "2"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "configmap new updated", func() bool { return state("new") == "update 2" })
	if err := cms.Delete(ctx, "new", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "configmap new deleted", func() bool { return state("new") == "delete 2" })
	if _, err := kube.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node n in the typed informer", func() bool { _, ok, _ := nodes.GetStore().GetByKey("n"); return ok })
	if s := state("elsewhere"); s != "" {
		t.Errorf("configmap default/elsewhere seen by the kube-system informer: %s", s)
	}
}

// TestServeWatchStop checks a raw watch's framing, and that stop ends it
// and leaves no goroutine behind.
func TestServeWatchStop(t *testing.T) {
	base := runtime.NumGoroutine()
	kube := fake.NewClientset()
	cfg, stop := serveClientset(kube)
	req, _ := http.NewRequest("GET", cfg.Host+"/api/v1/namespaces/a/configmaps?watch=true&labelSelector=keep", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("watch: %d %s %v, expected 200 application/json chunked", resp.StatusCode, resp.Header.Get("Content-Type"), resp.TransferEncoding)
	}
	for _, cm := range []*v1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "dropped", Namespace: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other-ns", Namespace: "b", Labels: map[string]string{"keep": ""}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "a", Labels: map[string]string{"keep": ""}}},
	} {
		if _, err := kube.CoreV1().ConfigMaps(cm.Namespace).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() {
		t.Fatalf("watch ended before an event: %v", lines.Err())
	}
	var ev struct {
		Type   string
		Object v1.ConfigMap
	}
	if err := json.Unmarshal(lines.Bytes(), &ev); err != nil || ev.Type != "ADDED" || ev.Object.Name != "kept" || ev.Object.Kind != "ConfigMap" || ev.Object.APIVersion != "v1" {
		t.Errorf("first event %s (%v), expected ADDED of v1 ConfigMap kept", lines.Bytes(), err)
	}
	// More events than the fake's watcher buffers (100), unread: the
	// server drains them (relay), so the fake does not panic.
	for i := range 300 {
		if _, err := kube.CoreV1().ConfigMaps("a").Create(t.Context(), &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("burst-", i), Namespace: "a", Labels: map[string]string{"keep": ""}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	stop()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("stop took %v with a watch open, expected it to end the watch at once", d)
	}
	n := 0
	for lines.Scan() {
		n++
	}
	if n > 300 {
		t.Errorf("after stop the watch read %d more events, expected at most the 300 of the burst, then its end", n)
	}
	resp.Body.Close()
	stop() // a second stop does nothing
	settled(t, base)
}

// TestServeDiscovery checks discovery, /version, and a dynamic client
// through a deferred discovery RESTMapper.
func TestServeDiscovery(t *testing.T) {
	ctx := t.Context()
	_, cfg := served(t, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "a"}})
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	groups, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("ServerGroupsAndResources: %v", err)
	}
	want := map[string]bool{"v1 nodes false": true, "v1 nodes/status false": true, "v1 configmaps true": true, "apps/v1 deployments true": true, "storage.k8s.io/v1 storageclasses false": true}
	for _, l := range lists {
		for _, r := range l.APIResources {
			delete(want, fmt.Sprintf("%s %s %v", l.GroupVersion, r.Name, r.Namespaced))
		}
	}
	if len(want) != 0 {
		t.Errorf("discovery lacks %v", want)
	}
	for _, g := range groups {
		if g.Name == "apps" && g.PreferredVersion.Version != "v1" {
			t.Errorf("apps prefers %s, expected v1", g.PreferredVersion.Version)
		}
	}
	if v, err := dc.ServerVersion(); err != nil || !strings.HasPrefix(v.GitVersion, "v1.") {
		t.Errorf("ServerVersion: %v, %v; expected v1.*", v, err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn := dynamic.NewForConfigOrDie(cfg)
	for _, tc := range []struct{ kind, ns, name string }{{"Node", "", "n"}, {"ConfigMap", "a", "c"}} {
		m, err := mapper.RESTMapping(schema.GroupKind{Kind: tc.kind})
		if err != nil {
			t.Fatalf("RESTMapping(%s): %v", tc.kind, err)
		}
		ri := dyn.Resource(m.Resource).Namespace(tc.ns)
		if tc.ns == "" {
			ri = dyn.Resource(m.Resource)
		}
		u, err := ri.Get(ctx, tc.name, metav1.GetOptions{})
		if err != nil || u.GetKind() != tc.kind || u.GetName() != tc.name {
			t.Errorf("dynamic get %s %s: %v, %v", tc.kind, tc.name, u, err)
		}
		if l, err := ri.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 || l.Items[0].GetKind() != tc.kind {
			t.Errorf("dynamic list %s: %v, %v", tc.kind, l, err)
		}
		if err := ri.Delete(ctx, tc.name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("dynamic delete %s: %v", tc.kind, err)
		}
	}
}

// TestApiserveScopes checks the served resources and their scope against
// the typed clientset: every typed client's resource is served (but the
// create-only reviews, which have no List kind), namespaced when the client
// takes a namespace, and every served resource has a typed client.
func TestApiserveScopes(t *testing.T) {
	kube := fake.NewClientset()
	typed := map[schema.GroupVersionResource]bool{} // → namespaced
	cv := reflect.ValueOf(kube)
	for i := range cv.NumMethod() {
		if m := cv.Type().Method(i); m.Type.NumIn() != 1 || m.Type.NumOut() != 1 || m.Type.Out(0).Kind() != reflect.Interface || m.Name == "Discovery" {
			continue
		}
		group := cv.Method(i).Call(nil)[0]
		for j := range group.NumMethod() {
			m := group.Type().Method(j)
			if m.Name == "RESTClient" || m.Type.NumOut() != 1 || m.Type.NumIn() > 1 || m.Type.NumIn() == 1 && m.Type.In(0).Kind() != reflect.String {
				continue
			}
			args := []reflect.Value{}
			if m.Type.NumIn() == 1 {
				args = append(args, reflect.ValueOf("ns"))
			}
			client, n := group.Method(j).Call(args)[0], len(kube.Actions())
			if get := client.MethodByName("Get"); get.IsValid() {
				get.Call([]reflect.Value{reflect.ValueOf(context.Background()), reflect.ValueOf("x"), reflect.ValueOf(metav1.GetOptions{})})
			}
			if acts := kube.Actions(); len(acts) > n {
				typed[acts[n].GetResource()] = acts[n].GetNamespace() == "ns"
			}
		}
	}
	served := 0
	for gv, rs := range apis().resources {
		for name, r := range rs {
			served++
			gvr := gv.WithResource(name)
			if namespaced, ok := typed[gvr]; !ok || namespaced != r.namespaced {
				t.Errorf("%v served namespaced=%v; typed client: exists %v, namespaced %v", gvr, r.namespaced, ok, namespaced)
			}
		}
	}
	for gvr := range typed {
		if _, ok := apis().resources[gvr.GroupVersion()][gvr.Resource]; !ok {
			t.Errorf("%v has a typed client with Get but is not served", gvr)
		}
	}
	if served < 100 {
		t.Errorf("%d resources served, expected every kind of client-go's scheme", served)
	}
}

// watchingCloud is a provider that, like the GCE provider, starts a
// ConfigMap informer over the builder's RESTClient in Initialize.
type watchingCloud struct {
	cloudprovider.Interface
	store cache.Store
}

func (c *watchingCloud) Initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	lw := cache.NewListWatchFromClient(b.ClientOrDie("watching-cloud").CoreV1().RESTClient(), "configmaps", "kube-system", fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, &v1.ConfigMap{}, 0, cache.Indexers{})
	c.store = inf.GetStore()
	go inf.Run(stop)
}

// TestClientBuilderInitialize runs initCloud in a rule, as every rule
// initializes its provider: the provider's informer over the builder's
// client sees a ConfigMap created later through the fake, and when the rule
// ends no goroutine is left.
func TestClientBuilderInitialize(t *testing.T) {
	base := runtime.NumGoroutine()
	cloud := &watchingCloud{}
	rl := &rule{id: "TEST-INITIALIZE", run: func(r *rt) {
		kube := fake.NewClientset()
		r.initCloud(cloud, kube)
		if _, err := kube.CoreV1().ConfigMaps("kube-system").Create(r.ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cloud-config"}}, metav1.CreateOptions{}); err != nil {
			r.Fatalf("create configmap: %v", err)
		}
		if !poll(r.ctx, func() bool { return len(cloud.store.ListKeys()) > 0 }) {
			r.Fatalf("the provider's informer did not see kube-system/cloud-config within 10s")
		}
	}}
	res := execute(t.Context(), &Config{Timeout: 10 * time.Second}, rl)
	if len(res.errs) != 0 || res.skip != "" {
		t.Fatalf("rule: %v %s, expected a pass", res.errs, res.skip)
	}
	settled(t, base)
}

// TestClientBuilder checks what Initialize's builder gives: configs with
// the user agent named, and real clientsets over them.
func TestClientBuilder(t *testing.T) {
	_, cfg := served(t, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	b := clientBuilder{cfg}
	c, err := b.Config("route-controller")
	if err != nil || c.Host != cfg.Host || !strings.HasSuffix(c.UserAgent, "/route-controller") || c == cfg {
		t.Errorf("Config: %+v, %v; expected a copy for %s with the user agent .../route-controller", c, err, cfg.Host)
	}
	if c := b.ConfigOrDie("x"); c.Host != cfg.Host || !strings.HasSuffix(c.UserAgent, "/x") || cfg.UserAgent != "" {
		t.Errorf("ConfigOrDie: %+v, expected a copy with the user agent .../x, the original unchanged", c)
	}
	client, err := b.Client("x")
	if _, ok := client.(*clientset.Clientset); !ok || err != nil || client.CoreV1().RESTClient() == nil {
		t.Fatalf("Client: %T, %v; expected a *kubernetes.Clientset with a RESTClient", client, err)
	}
	if _, err := b.ClientOrDie("x").CoreV1().Nodes().Get(t.Context(), "n", metav1.GetOptions{}); err != nil {
		t.Errorf("get node through ClientOrDie: %v", err)
	}
}
