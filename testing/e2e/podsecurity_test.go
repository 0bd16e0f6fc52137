package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ccmkit/ccmkit/testing/e2e/internal/buildcache"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// TestPodSecurity creates the pod of example/deploy's Deployment on the API
// server with server-side dry run (so nothing runs and nothing is stored)
// in namespaces that enforce the Pod Security Standards, through the
// API server's own PodSecurity admission:
//
//   - with hostNetwork off it is admitted at level "restricted", and the
//     same pod without its securityContexts is refused there (so the
//     namespace does enforce, and the hardening is what passes it);
//   - with hostNetwork on, as shipped, "baseline" refuses it for the host
//     network and "privileged" admits it: the level deployment.yaml's
//     comment documents for kube-system.
//
// It also checks what Pod Security does not: a fixed non-root UID, a
// read-only root filesystem, and resource requests and limits.
func TestPodSecurity(t *testing.T) {
	s := newScenario(t, "podsecurity")
	dep := exampleDeployment(t)
	tmpl := dep.Spec.Template

	sc, c := tmpl.Spec.SecurityContext, tmpl.Spec.Containers[0]
	switch {
	case sc == nil || sc.RunAsUser == nil || *sc.RunAsUser == 0 || sc.RunAsGroup == nil:
		t.Errorf("the pod's securityContext %+v: want a fixed non-zero runAsUser and a runAsGroup", sc)
	case c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem:
		t.Errorf("container %s's securityContext %+v: want readOnlyRootFilesystem: true", c.Name, c.SecurityContext)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("container %s has no %s request", c.Name, r)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Errorf("container %s has no memory limit", c.Name)
	}

	restricted := psaNamespace(t, s, "restricted")
	baseline := psaNamespace(t, s, "baseline")
	privileged := psaNamespace(t, s, "privileged")

	noHost := tmpl.DeepCopy()
	noHost.Spec.HostNetwork = false
	noHost.Spec.DNSPolicy = corev1.DNSClusterFirst
	if err := dryRunPod(t.Context(), restricted, dep.Spec.Template.Spec.ServiceAccountName, noHost); err != nil {
		t.Errorf("the Deployment's pod with hostNetwork off, in a namespace enforcing restricted: %v", err)
	}
	bare := noHost.DeepCopy()
	bare.Spec.SecurityContext = nil
	for i := range bare.Spec.Containers {
		bare.Spec.Containers[i].SecurityContext = nil
	}
	if err := dryRunPod(t.Context(), restricted, dep.Spec.Template.Spec.ServiceAccountName, bare); !apierrors.IsForbidden(err) {
		t.Errorf("the same pod without its securityContexts, in a namespace enforcing restricted: error %v, want Forbidden (does the namespace enforce?)", err)
	}

	err := dryRunPod(t.Context(), baseline, dep.Spec.Template.Spec.ServiceAccountName, &tmpl)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "hostNetwork") {
		t.Errorf("the Deployment's pod as shipped (hostNetwork on), in a namespace enforcing baseline: error %v, want Forbidden for hostNetwork", err)
	}
	if err := dryRunPod(t.Context(), privileged, dep.Spec.Template.Spec.ServiceAccountName, &tmpl); err != nil {
		t.Errorf("the Deployment's pod as shipped (hostNetwork on), in a namespace enforcing privileged: %v", err)
	}
}

// exampleDeployment reads the Deployment of example/deploy, or fails the
// test.
func exampleDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	root, err := buildcache.RootDir()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := workload.ReadManifests(filepath.Join(root, "example", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &d, true); err != nil {
			t.Fatalf("the Deployment %s of example/deploy: %v", o.GetName(), err)
		}
		if len(d.Spec.Template.Spec.Containers) == 0 {
			t.Fatalf("the Deployment %s of example/deploy has no containers", d.Name)
		}
		return &d
	}
	t.Fatal("example/deploy has no Deployment")
	return nil
}

// psaNamespace creates the namespace <scenario>-<level> enforcing Pod
// Security level at the latest version, and deletes it when the test ends.
func psaNamespace(t *testing.T, s *scenario, level string) string {
	t.Helper()
	name := s.ns + "-" + level
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         level,
		"pod-security.kubernetes.io/enforce-version": "latest",
	}}}
	if _, err := s.client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // t.Context() is done in cleanups
		defer cancel()
		if err := s.client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// dryRunPod creates a pod of tmpl in ns with server-side dry run (every
// admission plugin runs, nothing is stored), after creating the
// ServiceAccount it runs as there, which the ServiceAccount admission plugin
// looks up.
func dryRunPod(ctx context.Context, ns, serviceAccount string, tmpl *corev1.PodTemplateSpec) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: serviceAccount}}
	if _, err := shared.client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "cloud-controller-manager-", Namespace: ns, Labels: tmpl.Labels},
		Spec:       tmpl.Spec,
	}
	_, err := shared.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}
