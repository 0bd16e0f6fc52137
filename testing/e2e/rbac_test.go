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

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
	"github.com/ccmkit/ccmkit/testing/e2e/internal/buildcache"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// TestServiceAccountRBAC applies example/deploy/ to the API server and runs
// the CCM as the ServiceAccount those manifests bind, with a token from the
// TokenRequest API, the Deployment's own flags, the Secret's cloud-config,
// and its secure port on (so delegated authentication and authorization
// are exercised too). All four controllers and leader election must do their
// work without a single "forbidden" in the CCM's log.
func TestServiceAccountRBAC(t *testing.T) {
	s := newScenario(t, "rbac")
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

	// The ServiceAccount the manifests bind, and the Deployment's flags and
	// cloud-config.
	var saNS, saName string
	var deployArgs []string
	var cloud fake.Config
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			saName, _, _ = unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
			saNS = o.GetNamespace()
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if len(containers) == 0 {
				t.Fatalf("the Deployment %s has no containers", o.GetName())
			}
			deployArgs, _, _ = unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		case "Secret":
			data, _, _ := unstructured.NestedString(o.Object, "stringData", "cloud-config.yaml")
			if err := yaml.UnmarshalStrict([]byte(data), &cloud); err != nil {
				t.Fatalf("the Secret %s's cloud-config.yaml is not a valid fake cloud-config: %v", o.GetName(), err)
			}
		}
	}
	if saName == "" || len(deployArgs) == 0 {
		t.Fatalf("example/deploy has no Deployment with a serviceAccountName and args (got %q, %v)", saName, deployArgs)
	}
	tr, err := s.client.CoreV1().ServiceAccounts(saNS).CreateToken(t.Context(), saName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", saNS, saName, err)
	}
	kubeconfig := filepath.Join(s.dir, "sa.kubeconfig")
	if err := shared.cp.WriteKubeconfig(kubeconfig, tr.Status.Token); err != nil {
		t.Fatal(err)
	}

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
