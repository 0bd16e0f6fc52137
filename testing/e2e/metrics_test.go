package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// fakeOpSeries maps each fake cloud API operation (fake.Op, counted by the
// fake's GET /calls) to the ccmkit_cloud_requests_total series,
// "<capability>/<operation>", that count the same calls on the CCM's side.
// The fake's route table asks for gone targets (routes.InstanceChecker)
// with one ListInstances call (fake/routes.go, goneTargets), so
// ListInstances is the instances Cache's List plus the Table's
// GoneTargets.
var fakeOpSeries = map[fake.Op][]string{
	fake.OpListInstances:      {"instances/List", "routes/GoneTargets"},
	fake.OpGetInstance:        {"instances/GetByID"},
	fake.OpGetInstanceByName:  {"instances/GetByName"},
	fake.OpReadRouteTable:     {"routes/ReadTable"},
	fake.OpWriteRouteTable:    {"routes/WriteTable"},
	fake.OpFindLoadBalancers:  {"loadbalancer/Find"},
	fake.OpListLoadBalancers:  {"loadbalancer/List"},
	fake.OpApplyLoadBalancer:  {"loadbalancer/Apply"},
	fake.OpDeleteLoadBalancer: {"loadbalancer/Delete"},
}

// TestCloudMetrics scrapes the example CCM's /metrics on its secure port,
// as a Prometheus in the cluster would (a ServiceAccount token, RBAC
// allowing nonResourceURLs /metrics, authn/authz delegated to the API
// server), while its controllers initialize Nodes, create their routes and
// a load balancer, and delete the Node of a deleted instance, and checks ccmkit_cloud_requests_total, by operation,
// against the fake cloud's own call counters: every cloud call the blocks
// made is counted once, with no metrics code in the provider. The two are
// read at a moment when the counters stand still (fake, scrape, fake).
func TestCloudMetrics(t *testing.T) {
	s := newScenario(t, "metrics")
	token := metricsReader(t, s)
	port := freePort(t)
	c := s.startCCM("ccm", fake.Config{Instances: fakecloud.Instances("metrics", 3)},
		ccm.Config{ClusterCIDR: "10.244.0.0/16", SecurePort: port})
	nodes := []string{"metrics-1", "metrics-2", "metrics-3"}
	s.createNodes(nodes, func(i int) workload.NodeOptions {
		return workload.NodeOptions{PodCIDRs: []string{fmt.Sprintf("10.244.%d.0/24", i+1)}}
	})
	s.waitNodesInitialized(nodes, initTimeout)
	admin := s.admin(c, initTimeout)
	s.createService(workload.LoadBalancerService(s.ns, "web", 80))
	s.waitIngress("web", initTimeout)
	s.poll(changeTimeout, "a route per node", func(ctx context.Context) (bool, string) {
		routes, err := admin.Routes(ctx, s.name)
		if err != nil {
			return false, err.Error()
		}
		return len(routes) == len(nodes), fmt.Sprintf("%d routes", len(routes))
	})

	// A deleted instance: the Cache's list no longer has it, a direct
	// GetByID says not-found, the node-lifecycle controller deletes the
	// Node.
	if err := admin.DeleteInstance(t.Context(), "i-metrics-3"); err != nil {
		t.Fatal(err)
	}
	s.poll(changeTimeout, "node metrics-3 deleted after its instance", func(ctx context.Context) (bool, string) {
		_, err := s.client.CoreV1().Nodes().Get(ctx, "metrics-3", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	// The route controller's periodic reconcile lists the routes, whose
	// targets the Table checks (routes.InstanceChecker).
	s.poll(changeTimeout, "a route listing with targets (routes/GoneTargets) and the deleted node's route gone", func(ctx context.Context) (bool, string) {
		text, err := scrape(ctx, port, token)
		if err != nil {
			return false, err.Error()
		}
		routes, err := admin.Routes(ctx, s.name)
		if err != nil {
			return false, err.Error()
		}
		checks := counters(text, "ccmkit_cloud_requests_total", "capability", "operation")["routes/GoneTargets"]
		return checks > 0 && len(routes) == len(nodes)-1, fmt.Sprintf("%v GoneTargets calls, %d routes", checks, len(routes))
	})

	var scraped string
	s.poll(changeTimeout, "ccmkit_cloud_requests_total to equal the fake's call counters while neither moves", func(ctx context.Context) (bool, string) {
		before, err := admin.Calls(ctx)
		if err != nil {
			return false, err.Error()
		}
		if scraped, err = scrape(ctx, port, token); err != nil {
			return false, err.Error()
		}
		after, err := admin.Calls(ctx)
		if err != nil {
			return false, err.Error()
		}
		if !maps.Equal(before.ByOp, after.ByOp) {
			return false, fmt.Sprintf("the fake's counters moved during the scrape: %v -> %v", before.ByOp, after.ByOp)
		}
		want, got := compareByOp(t, after.ByOp, counters(scraped, "ccmkit_cloud_requests_total", "capability", "operation"))
		diff := cmp.Diff(want, got)
		return diff == "", "calls by fake operation (-fake +metrics):\n" + diff
	})

	t.Logf("cloud calls by series at the scrape: %v", counters(scraped, "ccmkit_cloud_requests_total", "capability", "operation"))

	// The comparison is not vacuous: every block called the cloud, and the
	// node controller's look-ups were answered by the instances Cache.
	requests := counters(scraped, "ccmkit_cloud_requests_total", "capability", "operation")
	for _, series := range []string{"instances/List", "instances/GetByID", "routes/GoneTargets", "routes/ReadTable", "routes/WriteTable", "loadbalancer/List", "loadbalancer/Apply"} {
		if requests[series] == 0 {
			t.Errorf("ccmkit_cloud_requests_total has no %s calls after nodes, routes and a load balancer were made:\n%s", series, excerpt(scraped, "ccmkit_"))
		}
	}
	if hits := counters(scraped, "ccmkit_cache_lookups_total", "cache", "result")["instances/hit"]; hits == 0 {
		t.Errorf("ccmkit_cache_lookups_total{cache=\"instances\",result=\"hit\"} is 0: the node controller's look-ups should be answered from the list:\n%s", excerpt(scraped, "ccmkit_"))
	}
	if latency := counters(scraped, "ccmkit_cloud_request_duration_seconds_count", "capability", "operation"); !maps.Equal(latency, requests) {
		t.Errorf("ccmkit_cloud_request_duration_seconds observations %v differ from the calls %v", latency, requests)
	}
}

// compareByOp returns, per fake operation, the fake's count and the sum of
// the matching series (fakeOpSeries). The load-balancer operations are
// left out when the CCM exports no load-balancer series at all (a build
// from before the loadbalancer package recorded its calls).
func compareByOp(t *testing.T, byOp map[fake.Op]int64, series map[string]float64) (fakeCounts, metricCounts map[fake.Op]float64) {
	lb := slices.ContainsFunc(slices.Collect(maps.Keys(series)), func(k string) bool { return strings.HasPrefix(k, "loadbalancer/") })
	fakeCounts, metricCounts = map[fake.Op]float64{}, map[fake.Op]float64{}
	for op, names := range fakeOpSeries {
		if !lb && strings.HasPrefix(names[0], "loadbalancer/") {
			t.Logf("no loadbalancer series in ccmkit_cloud_requests_total: %s not compared", op)
			continue
		}
		fakeCounts[op] = float64(byOp[op])
		for _, n := range names {
			metricCounts[op] += series[n]
		}
	}
	return fakeCounts, metricCounts
}

// metricsReader creates a ServiceAccount allowed to GET /metrics (a
// ClusterRole on nonResourceURLs, as a cluster's Prometheus has) and
// returns a token for it from the TokenRequest API. Its cleanup deletes
// the cluster-scoped objects.
func metricsReader(t *testing.T, s *scenario) string {
	t.Helper()
	name := "e2e-" + s.name + "-metrics-reader"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "metrics-reader"}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: s.ns, Name: sa.Name}},
	}
	ctx := t.Context()
	if _, err := s.client.CoreV1().ServiceAccounts(s.ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ServiceAccount %s/%s: %v", s.ns, sa.Name, err)
	}
	if _, err := s.client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ClusterRole %s: %v", name, err)
	}
	if _, err := s.client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ClusterRoleBinding %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.client.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("cleanup: deleting ClusterRoleBinding %s: %v", name, err)
		}
		if err := s.client.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("cleanup: deleting ClusterRole %s: %v", name, err)
		}
	})
	tr, err := s.client.CoreV1().ServiceAccounts(s.ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", s.ns, sa.Name, err)
	}
	return tr.Status.Token
}

// scrape GETs /metrics from the CCM's secure port on loopback with a
// bearer token. The CCM's serving certificate is self-signed, generated
// at start: the scrape trusts it, as it is about the metrics, not TLS.
func scrape(ctx context.Context, port int, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := cl.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET /metrics on the CCM's secure port: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("GET /metrics: reading the body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: status %d, expected 200: %s", resp.StatusCode, excerpt(string(body), ""))
	}
	return string(body), nil
}

// counters sums the samples of metric name in a Prometheus text
// exposition by the values of two labels, keyed "<value1>/<value2>".
// Label values are taken as written (ccmkit's hold no quotes or
// escapes).
func counters(text, name, label1, label2 string) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		labels, value, ok := sample(sc.Text(), name)
		if !ok {
			continue
		}
		out[labels[label1]+"/"+labels[label2]] += value
	}
	return out
}

// sample parses line as one sample of metric name: name{k="v",...} value.
func sample(line, name string) (labels map[string]string, value float64, ok bool) {
	rest, found := strings.CutPrefix(line, name+"{")
	if !found {
		return nil, 0, false
	}
	list, num, found := strings.Cut(rest, "} ")
	if !found {
		return nil, 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil {
		return nil, 0, false
	}
	labels = map[string]string{}
	for _, kv := range strings.Split(list, ",") {
		k, q, _ := strings.Cut(kv, "=")
		labels[k] = strings.Trim(q, `"`)
	}
	return labels, v, true
}

// excerpt returns the lines of text that start with prefix, at most 40.
func excerpt(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) && len(out) < 40 {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
