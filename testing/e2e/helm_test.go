package e2e

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/chart"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// TestHelmChart installs example/chart with Helm's library (as `helm
// install` does) into the scenario's namespace, then runs the CCM the
// release describes: the built binary with the installed Deployment's
// flags, as the installed ServiceAccount (a TokenRequest token, so the
// chart's RBAC is what it may do), with the installed Secret's
// cloud-config, leader election on the chart's Lease. It must initialize a
// Node and converge a Service without one request refused; then the
// release is uninstalled and its cluster-wide objects are gone.
func TestHelmChart(t *testing.T) {
	s := newScenario(t, "helm")
	name := "ccm-" + s.name
	cloudConfig, err := yaml.Marshal(fake.Config{ClusterID: s.name, Instances: fakecloud.Instances(s.name, 1)})
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{
		"fullnameOverride": name,
		"clusterName":      s.name,
		"cloudConfig":      map[string]any{"content": string(cloudConfig)},
		"housekeeping":     map[string]any{"driftRepairPeriod": "2s"},
		// The admission policy acts on every namespace; TestAdmission
		// covers it, and the other scenarios create Services it refuses.
		"admissionPolicy": map[string]any{"enabled": false},
	}
	rel, err := chart.Install(t.Context(), shared.cp.KubeconfigPath(), s.ns, "ccm", values, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			if err := rel.Uninstall(time.Minute); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})

	// What the release installed, read back from the API server.
	dep, err := s.client.AppsV1().Deployments(s.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the release's Deployment: %v", err)
	}
	sec, err := s.client.CoreV1().Secrets(s.ns).Get(t.Context(), name+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the release's Secret: %v", err)
	}
	var cloud fake.Config
	if err := yaml.UnmarshalStrict(sec.Data["cloud-config.yaml"], &cloud); err != nil {
		t.Fatalf("the release's cloud-config: %v", err)
	}
	for _, kind := range []struct {
		what string
		get  func() error
	}{
		{"PodDisruptionBudget", func() error {
			_, err := s.client.PolicyV1().PodDisruptionBudgets(s.ns).Get(t.Context(), name, metav1.GetOptions{})
			return err
		}},
		{"metrics Service", func() error {
			_, err := s.client.CoreV1().Services(s.ns).Get(t.Context(), name+"-metrics", metav1.GetOptions{})
			return err
		}},
	} {
		if err := kind.get(); err != nil {
			t.Errorf("the release's %s: %v", kind.what, err)
		}
	}

	d := deploy{saNS: s.ns, saName: dep.Spec.Template.Spec.ServiceAccountName, cloud: cloud}
	kubeconfig := filepath.Join(s.dir, "sa.kubeconfig")
	if err := shared.cp.WriteKubeconfig(kubeconfig, d.token(t, s)); err != nil {
		t.Fatal(err)
	}
	// The Deployment's flags but for the in-pod cloud-config path and the
	// port (the harness gives both); ExtraArgs come last, so the chart's
	// cluster name and Lease are the ones used.
	var args []string
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		if !strings.HasPrefix(a, "--cloud-config=") && !strings.HasPrefix(a, "--secure-port=") {
			args = append(args, a)
		}
	}
	if !slices.Contains(args, "--leader-elect-resource-namespace="+s.ns) || !slices.Contains(args, "--drift-repair-period=2s") {
		t.Fatalf("the Deployment's args %v: want the release namespace's Lease and the drift-repair period of the values", args)
	}
	c := s.startCCM("ccm", cloud, ccm.Config{Kubeconfig: kubeconfig, LeaderElect: true, LeaseName: name, ExtraArgs: args})
	s.createNodes([]string{s.name + "-1"}, nil)
	s.waitNodesInitialized([]string{s.name + "-1"}, initTimeout)
	s.createService(workload.LoadBalancerService(s.ns, "web", 80))
	s.waitIngress("web", initTimeout)
	s.waitLog(c.LogPath(), "services=1 converged=1", changeTimeout)
	if _, err := s.client.CoordinationV1().Leases(s.ns).Get(t.Context(), name, metav1.GetOptions{}); err != nil {
		t.Errorf("the chart's Lease %s/%s: %v", s.ns, name, err)
	}
	forbidden := regexp.MustCompile(`(?i)forbidden|cannot (get|list|watch|create|update|patch|delete) resource`)
	for _, line := range strings.Split(c.LogTail(1_000_000), "\n") {
		if forbidden.MatchString(line) {
			t.Errorf("the CCM running as %s/%s was refused by the chart's RBAC: %s", d.saNS, d.saName, line)
			break
		}
	}

	// Uninstall while the CCM runs (its cleanup stops it): what it logs
	// after losing its RBAC is not checked.
	if err := rel.Uninstall(time.Minute); err != nil {
		t.Fatal(err)
	}
	uninstalled = true
	if _, err := s.client.RbacV1().ClusterRoles().Get(t.Context(), "ccmkit:"+name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole ccmkit:%s after uninstall: %v, want NotFound", name, err)
	}
	if _, err := s.client.AppsV1().Deployments(s.ns).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment %s after uninstall: %v, want NotFound", name, err)
	}
}
