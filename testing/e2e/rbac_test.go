package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
	"github.com/ccmkit/ccmkit/testing/e2e/internal/buildcache"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// TestServiceAccountRBAC applies example/deploy/ to the API server and runs
// the CCM as the ServiceAccount those manifests bind, with a token from the
// TokenRequest API, the Deployment's own flags, the Secret's cloud-config,
// and its secure port on (so delegated authentication and authorization
// are exercised too). All four controllers, ccmkit's two housekeeping
// controllers (drift-repair and orphan-collection, with short periods) and
// leader election must do their work without a single "forbidden" in the
// CCM's log.
func TestServiceAccountRBAC(t *testing.T) {
	s := newScenario(t, "rbac")
	d := applyDeploy(t, s)
	kubeconfig := filepath.Join(s.dir, "sa.kubeconfig")
	if err := shared.cp.WriteKubeconfig(kubeconfig, d.token(t, s)); err != nil {
		t.Fatal(err)
	}
	saNS, saName, deployArgs, cloud := d.saNS, d.saName, d.args, d.cloud

	// The Deployment's flags, except the cloud-config path, the port and
	// routes (off in the Deployment), then this test's: its own cluster
	// name (as every scenario; the Secret's clusterID owns the cloud's
	// load balancers and routes), routes on (so the route controller's
	// permissions are used), the secure port on loopback with delegated
	// authn/authz through the same identity.
	port := freePort(t)
	var args []string
	for _, a := range deployArgs {
		if strings.HasPrefix(a, "--cloud-config=") || strings.HasPrefix(a, "--secure-port=") || strings.HasPrefix(a, "--configure-cloud-routes=") {
			continue
		}
		args = append(args, a)
	}
	args = append(args,
		"--cluster-name="+s.name,
		"--secure-port="+strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--drift-repair-period=2s", "--orphan-collection-period=2s", "--orphan-grace-period=-1s",
	)
	cloud.Instances = fakecloud.Instances("rbac", 3)
	c := s.startCCM("ccm", cloud, ccm.Config{
		Kubeconfig:  kubeconfig,
		LeaderElect: true,
		// The Role in rbac.yaml allows exactly this Lease.
		LeaseName:   "cloud-controller-manager",
		ClusterCIDR: "10.244.0.0/16",
		ExtraArgs:   args,
	})
	admin := s.admin(c, initTimeout)

	// cloud-node: initialize.
	nodes := []string{"rbac-1", "rbac-2", "rbac-3"}
	s.createNodes(nodes, func(i int) workload.NodeOptions {
		return workload.NodeOptions{PodCIDRs: []string{fmt.Sprintf("10.244.%d.0/24", i+1)}}
	})
	s.waitNodesInitialized(nodes, initTimeout)
	// service: finalizer, load balancer, status.
	svc := s.createService(workload.LoadBalancerService(s.ns, "web", 80))
	s.waitIngress("web", initTimeout)
	s.waitLB(admin, svc.UID, changeTimeout, "one load balancer for service web", func(l []fake.LoadBalancer) bool { return len(l) == 1 })
	// route: routes and the nodes' NetworkUnavailable condition.
	s.poll(changeTimeout, "three routes for the three pod CIDRs", func(ctx context.Context) (bool, string) {
		routes, err := admin.Routes(ctx, s.clusterID(cloud))
		if err != nil {
			return false, err.Error()
		}
		return len(routes) == 3, fmt.Sprintf("routes %+v", routes)
	})
	// drift-repair: a pass over the Service (informers, EnsureLoadBalancer).
	s.waitLog(c.LogPath(), "services=1 converged=1", changeTimeout)
	// orphan-collection: a load balancer of this cluster whose Service UID
	// is gone is checked against the API server (a List with a field
	// selector), deleted, and reported by an event on the gone Service.
	ghost, err := admin.CreateLoadBalancer(t.Context(), loadbalancer.LoadBalancer{Name: "ghost-" + s.name,
		Tags: map[string]string{loadbalancer.TagCluster: s.clusterID(cloud), loadbalancer.TagServiceUID: "ghost-" + s.name, loadbalancer.TagService: s.ns + "/ghost"},
		Spec: loadbalancer.Spec{IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}})
	if err != nil {
		t.Fatal(err)
	}
	s.waitEvent(s.ns, types.UID("ghost-"+s.name), corev1.EventTypeNormal, "DeletedOrphanedLoadBalancer", ghost.ID)
	// cloud-node-lifecycle: shutdown taint and Node deletion.
	if _, err := admin.StopInstance(t.Context(), "i-rbac-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.TerminateInstance(t.Context(), "i-rbac-3"); err != nil {
		t.Fatal(err)
	}
	s.poll(changeTimeout, "node rbac-2 tainted shutdown and node rbac-3 deleted", func(ctx context.Context) (bool, string) {
		n2, err := s.client.CoreV1().Nodes().Get(ctx, "rbac-2", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, err = s.client.CoreV1().Nodes().Get(ctx, "rbac-3", metav1.GetOptions{})
		return workload.HasTaint(n2, workload.ShutdownTaint) && apierrors.IsNotFound(err), fmt.Sprintf("%s; rbac-3: %v", workload.DescribeNode(n2), err)
	})
	// service: deletion removes the finalizer.
	if err := s.client.CoreV1().Services(s.ns).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.poll(changeTimeout, "deleted service web to disappear", func(ctx context.Context) (bool, string) {
		_, err := s.client.CoreV1().Services(s.ns).Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})

	// Delegated authentication and authorization on the secure port: the
	// admin token is reviewed by the API server with the CCM's identity
	// (system:auth-delegator), an anonymous request is refused.
	metrics := func(token string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		// The CCM's serving certificate is self-signed and generated at
		// start: this probe is about authn/authz, not TLS.
		cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatalf("GET /metrics on the CCM's secure port: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := metrics(shared.cp.RESTConfig().BearerToken); code != http.StatusOK {
		t.Errorf("GET /metrics with the admin token: status %d, want 200 (delegated authn/authz through the ServiceAccount)", code)
	}
	if code := metrics(""); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("GET /metrics without a token: status %d, want 401 or 403", code)
	}

	// Not one request of the CCM was refused.
	forbidden := regexp.MustCompile(`(?i)forbidden|cannot (get|list|watch|create|update|patch|delete) resource`)
	var refused []string
	for _, line := range strings.Split(c.LogTail(1_000_000), "\n") {
		if forbidden.MatchString(line) {
			refused = append(refused, line)
		}
	}
	if len(refused) > 0 {
		t.Errorf("the CCM running as %s/%s was refused %d times by RBAC; first: %s", saNS, saName, len(refused), refused[0])
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// deploy is what a test needs from example/deploy/ once it is applied: the
// ServiceAccount the Deployment runs as, the Deployment's container args and
// the Secret's cloud-config.
type deploy struct {
	saNS, saName string
	args         []string
	cloud        fake.Config
}

// applyDeploy applies example/deploy/ to the shared API server (server-side
// apply, so every test may apply it again) and reads the Deployment and the
// Secret, or fails the test. The admission policy and its binding
// (admission-policy.yaml) act on every namespace, so the test's cleanup
// deletes them: the other scenarios create Services the policy would
// refuse on purpose.
func applyDeploy(t *testing.T, s *scenario) deploy {
	t.Helper()
	root, err := buildcache.RootDir()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := workload.ReadManifests(filepath.Join(root, "example", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	applied, err := workload.ApplyManifests(t.Context(), shared.cp.RESTConfig(), objs)
	if err != nil {
		t.Fatalf("applying example/deploy (applied so far %v): %v", applied, err)
	}
	t.Logf("applied %v", applied)
	t.Cleanup(func() { deleteAdmissionPolicies(t, objs) })
	var d deploy
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			d.saName, _, _ = unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
			d.saNS = o.GetNamespace()
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if len(containers) == 0 {
				t.Fatalf("the Deployment %s has no containers", o.GetName())
			}
			d.args, _, _ = unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		case "Secret":
			data, _, _ := unstructured.NestedString(o.Object, "stringData", "cloud-config.yaml")
			if err := yaml.UnmarshalStrict([]byte(data), &d.cloud); err != nil {
				t.Fatalf("the Secret %s's cloud-config.yaml is not a valid fake cloud-config: %v", o.GetName(), err)
			}
		}
	}
	if d.saName == "" || len(d.args) == 0 {
		t.Fatalf("example/deploy has no Deployment with a serviceAccountName and args (got %q, %v)", d.saName, d.args)
	}
	return d
}

// deleteAdmissionPolicies deletes the ValidatingAdmissionPolicies and
// bindings among objs.
func deleteAdmissionPolicies(t *testing.T, objs []*unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // t.Context() is done in cleanups
	defer cancel()
	api := shared.client.AdmissionregistrationV1()
	for _, o := range objs {
		var err error
		switch o.GetKind() {
		case "ValidatingAdmissionPolicy":
			err = api.ValidatingAdmissionPolicies().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		case "ValidatingAdmissionPolicyBinding":
			err = api.ValidatingAdmissionPolicyBindings().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		default:
			continue
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: deleting %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// token returns a one-hour token of the Deployment's ServiceAccount from the
// TokenRequest API, or fails the test.
func (d deploy) token(t *testing.T, s *scenario) string {
	t.Helper()
	tr, err := s.client.CoreV1().ServiceAccounts(d.saNS).CreateToken(t.Context(), d.saName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", d.saNS, d.saName, err)
	}
	return tr.Status.Token
}

// TestServiceAccountRBACLeastPrivilege pins the role example/deploy/ gives
// the CCM's ServiceAccount, asked of the API server with that account's own
// token (SelfSubjectAccessReview): every verb rbac.yaml derives from an
// upstream call is allowed, and the verbs the controllers never use are
// refused, above all any write to a Service's spec. Then it tries the writes
// for real: a patch and an update of a Service's spec and an update of a
// Node's status are Forbidden, and the one write the CCM has on Services, a
// patch through the status subresource (what service/helpers PatchService
// sends to add the finalizer), leaves the spec unchanged even when the patch
// carries one.
func TestServiceAccountRBACLeastPrivilege(t *testing.T) {
	s := newScenario(t, "rbac-least")
	d := applyDeploy(t, s)
	sa, err := kubernetes.NewForConfig(shared.cp.TokenRESTConfig(d.token(t, s)))
	if err != nil {
		t.Fatal(err)
	}

	const lease = "cloud-controller-manager"
	type attrs = authorizationv1.ResourceAttributes
	cases := []struct {
		reason string
		attrs  attrs
		want   bool
	}{
		// Allowed: each is a verb of rbac.yaml and the call named there.
		{"node/helpers addOrUpdateLabelsOnNode, AddOrUpdateTaintOnNode, RemoveTaintOffNode re-read the Node", attrs{Verb: "get", Resource: "nodes"}, true},
		{"the Node informer", attrs{Verb: "list", Resource: "nodes"}, true},
		{"the Node informer", attrs{Verb: "watch", Resource: "nodes"}, true},
		{"node_controller.go syncNode updates the Node", attrs{Verb: "update", Resource: "nodes"}, true},
		{"node/helpers patch labels and taints", attrs{Verb: "patch", Resource: "nodes"}, true},
		{"node_lifecycle_controller.go MonitorNodes deletes a Node whose instance is gone", attrs{Verb: "delete", Resource: "nodes"}, true},
		{"PatchNodeStatus (addresses) and SetNodeCondition (NetworkUnavailable)", attrs{Verb: "patch", Resource: "nodes", Subresource: "status"}, true},
		{"the Service informer", attrs{Verb: "list", Resource: "services", Namespace: s.ns}, true},
		{"the Service informer", attrs{Verb: "watch", Resource: "services", Namespace: s.ns}, true},
		{"service/helpers PatchService: ingress and finalizer through the status subresource", attrs{Verb: "patch", Resource: "services", Subresource: "status", Namespace: s.ns}, true},
		{"the recorders create events on Services", attrs{Verb: "create", Resource: "events", Namespace: s.ns}, true},
		{"the recorders aggregate repeated events", attrs{Verb: "patch", Resource: "events", Namespace: s.ns}, true},
		{"events on Nodes (cloud-node, ccmkit's loadbalancer) go to default", attrs{Verb: "create", Resource: "events", Namespace: metav1.NamespaceDefault}, true},
		{"leader-election events on the Lease", attrs{Verb: "create", Resource: "events", Namespace: metav1.NamespaceSystem}, true},
		{"LeaseLock.Create", attrs{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: metav1.NamespaceSystem}, true},
		{"LeaseLock.Get", attrs{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: metav1.NamespaceSystem, Name: lease}, true},
		{"LeaseLock.Update", attrs{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: metav1.NamespaceSystem, Name: lease}, true},
		{"delegated authentication of the secure port", attrs{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}, true},
		{"delegated authorization of the secure port", attrs{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, true},
		{"delegated authentication reads the client CAs", attrs{Verb: "get", Resource: "configmaps", Namespace: metav1.NamespaceSystem, Name: "extension-apiserver-authentication"}, true},

		// Refused: nothing in the CCM needs them.
		{"a Service's spec is never patched: PatchService uses the status subresource", attrs{Verb: "patch", Resource: "services", Namespace: s.ns}, false},
		{"a Service's spec is never updated", attrs{Verb: "update", Resource: "services", Namespace: s.ns}, false},
		{"Services are read from the informer", attrs{Verb: "get", Resource: "services", Namespace: s.ns}, false},
		{"the CCM creates no Service", attrs{Verb: "create", Resource: "services", Namespace: s.ns}, false},
		{"the CCM deletes no Service", attrs{Verb: "delete", Resource: "services", Namespace: s.ns}, false},
		{"Service status is patched, never updated", attrs{Verb: "update", Resource: "services", Subresource: "status", Namespace: s.ns}, false},
		{"Node status is patched, never updated", attrs{Verb: "update", Resource: "nodes", Subresource: "status"}, false},
		{"Nodes are registered by kubelets", attrs{Verb: "create", Resource: "nodes"}, false},
		{"the core/v1 recorder never updates an event", attrs{Verb: "update", Resource: "events", Namespace: s.ns}, false},
		{"no events.k8s.io recorder runs in the CCM", attrs{Verb: "create", Group: "events.k8s.io", Resource: "events", Namespace: s.ns}, false},
		{"another component's Lease", attrs{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: metav1.NamespaceSystem, Name: "kube-controller-manager"}, false},
		{"the Lease is never deleted", attrs{Verb: "delete", Group: "coordination.k8s.io", Resource: "leases", Namespace: metav1.NamespaceSystem, Name: lease}, false},
		{"no other ConfigMap", attrs{Verb: "get", Resource: "configmaps", Namespace: metav1.NamespaceSystem, Name: "kube-proxy"}, false},
		{"no Secret: the cloud-config is a mounted volume", attrs{Verb: "get", Resource: "secrets", Namespace: metav1.NamespaceSystem}, false},
		{"no Pods", attrs{Verb: "list", Resource: "pods"}, false},
		{"no service-account tokens (--use-service-account-credentials=false)", attrs{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: metav1.NamespaceSystem}, false},
	}
	key := func(a attrs) string {
		r := a.Resource
		if a.Group != "" {
			r += "." + a.Group
		}
		if a.Subresource != "" {
			r += "/" + a.Subresource
		}
		return fmt.Sprintf("%s %s ns=%q name=%q", a.Verb, r, a.Namespace, a.Name)
	}
	want, got := map[string]bool{}, map[string]bool{}
	for _, c := range cases {
		k := key(c.attrs)
		if _, dup := want[k]; dup {
			t.Fatalf("case %s is listed twice", k)
		}
		want[k] = c.want
		r, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ptr.To(c.attrs)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectAccessReview %s (%s): %v", k, c.reason, err)
		}
		got[k] = r.Status.Allowed
		if r.Status.Allowed != c.want {
			t.Logf("%s: allowed %v, want %v: %s", k, r.Status.Allowed, c.want, c.reason)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what %s/%s may do (-want +got):\n%s", d.saNS, d.saName, diff)
	}

	// The writes themselves, with the ServiceAccount's token.
	svc := s.createService(workload.LoadBalancerService(s.ns, "web", 80))
	s.createNodes([]string{"rbac-least-1"}, nil)
	ctx := t.Context()
	foreignSpec := []byte(`{"spec":{"externalIPs":["203.0.113.7"],"ports":[{"port":80,"targetPort":8080,"protocol":"TCP"}]}}`)
	writes := []struct {
		reason string
		write  func() error
	}{
		{"patch of a Service's spec", func() error {
			_, err := sa.CoreV1().Services(s.ns).Patch(ctx, svc.Name, types.MergePatchType, foreignSpec, metav1.PatchOptions{})
			return err
		}},
		{"update of a Service's spec", func() error {
			u := svc.DeepCopy()
			u.Spec.ExternalIPs = []string{"203.0.113.7"}
			_, err := sa.CoreV1().Services(s.ns).Update(ctx, u, metav1.UpdateOptions{})
			return err
		}},
		{"update of a Node's status", func() error {
			n := s.node("rbac-least-1")
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue, Reason: "RBACTest"})
			_, err := sa.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		}},
	}
	for _, w := range writes {
		if err := w.write(); !apierrors.IsForbidden(err) {
			t.Errorf("%s with the token of %s/%s: error %v, want Forbidden", w.reason, d.saNS, d.saName, err)
		}
	}

	// The status subresource, which the CCM may patch, keeps the spec: the
	// finalizer goes in, the spec in the same patch is dropped.
	statusPatch := []byte(`{"metadata":{"finalizers":["service.kubernetes.io/load-balancer-cleanup"]},"spec":{"externalIPs":["203.0.113.7"]}}`)
	if _, err := sa.CoreV1().Services(s.ns).Patch(ctx, svc.Name, types.MergePatchType, statusPatch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("patch of services/status with the token of %s/%s (what service/helpers PatchService sends): %v", d.saNS, d.saName, err)
	}
	after := s.service(svc.Name)
	if diff := cmp.Diff(svc.Spec, after.Spec); diff != "" {
		t.Errorf("the Service's spec after the ServiceAccount's writes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"service.kubernetes.io/load-balancer-cleanup"}, after.Finalizers); diff != "" {
		t.Errorf("the Service's finalizers after the status patch (-want +got):\n%s", diff)
	}
}
