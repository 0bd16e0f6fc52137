package chart

import (
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/ccmkit/ccmkit/testing/e2e/internal/buildcache"
)

var update = flag.Bool("update", false, "regenerate example/deploy from example/chart")

func load(t *testing.T) *chartv2.Chart {
	t.Helper()
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func deployDir(t *testing.T) string {
	t.Helper()
	root, err := buildcache.RootDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "example", "deploy")
}

// TestDeployIsTheRenderedChart: example/deploy is the chart rendered with
// its default values, and the chart's copy of the admission policy is the
// generator's output in example/deploy. With -update it copies the policy
// into the chart and rewrites example/deploy.
func TestDeployIsTheRenderedChart(t *testing.T) {
	dir := deployDir(t)
	chartDir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		policy, err := os.ReadFile(filepath.Join(dir, policyFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(chartDir, "files", policyFile), policy, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rendered, err := Render(load(t), "cloud-controller-manager", DeployNamespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := DeployFiles(rendered)
	if *update {
		for name, text := range want {
			if name == policyFile {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got))); diff != "" {
		t.Errorf("files of example/deploy (-rendered +on disk): remove the stale ones or run with -update\n%s", diff)
	}
	for name, text := range want {
		if diff := cmp.Diff(text, got[name]); diff != "" && got[name] != "" {
			what := "the rendered chart; run with -update"
			if name == policyFile {
				what = "the chart's files/" + policyFile + "; run with -update to copy the generator's output into the chart"
			}
			t.Errorf("example/deploy/%s is not %s (-rendered +on disk):\n%s", name, what, diff)
		}
	}
}

// rendering is one rendering of the chart, by kind and name.
type rendering struct {
	t    *testing.T
	objs []*unstructured.Unstructured
}

func render(t *testing.T, name, namespace string, values map[string]any) rendering {
	t.Helper()
	files, err := Render(load(t), name, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(files)
	if err != nil {
		t.Fatal(err)
	}
	return rendering{t: t, objs: objs}
}

// kinds lists "Kind namespace/name" of every object.
func (r rendering) kinds() []string {
	var k []string
	for _, o := range r.objs {
		k = append(k, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	slices.Sort(k)
	return k
}

// get converts the only object of kind (and name, if not empty) into out.
func (r rendering) get(kind, name string, out any) {
	r.t.Helper()
	for _, o := range r.objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
				r.t.Fatalf("%s %s: %v", kind, o.GetName(), err)
			}
			return
		}
	}
	r.t.Fatalf("no %s %q among %v", kind, name, r.kinds())
}

func (r rendering) deployment() *appsv1.Deployment {
	var d appsv1.Deployment
	r.get("Deployment", "", &d)
	return &d
}

func TestRenderDefaults(t *testing.T) {
	r := render(t, "ccm", DeployNamespace, nil)
	want := []string{
		"ClusterRole /ccmkit:cloud-controller-manager",
		"ClusterRoleBinding /ccmkit:cloud-controller-manager",
		"ClusterRoleBinding /ccmkit:cloud-controller-manager:auth-delegator",
		"Deployment kube-system/cloud-controller-manager",
		"PodDisruptionBudget kube-system/cloud-controller-manager",
		"Role kube-system/ccmkit:cloud-controller-manager:leader-election",
		"RoleBinding kube-system/ccmkit:cloud-controller-manager:authentication-reader",
		"RoleBinding kube-system/ccmkit:cloud-controller-manager:leader-election",
		"Secret kube-system/cloud-controller-manager-config",
		"Service kube-system/cloud-controller-manager-metrics",
		"ServiceAccount kube-system/cloud-controller-manager",
		"ValidatingAdmissionPolicy /ccmkit-fake-service-load-balancer",
		"ValidatingAdmissionPolicyBinding /ccmkit-fake-service-load-balancer",
	}
	if diff := cmp.Diff(want, r.kinds()); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	d := r.deployment()
	if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Affinity == nil || !d.Spec.Template.Spec.HostNetwork {
		t.Errorf("replicas %d, affinity %v, hostNetwork %v: want 2 replicas, one per node, on the host network", *d.Spec.Replicas, d.Spec.Template.Spec.Affinity, d.Spec.Template.Spec.HostNetwork)
	}
	wantArgs := []string{
		"--cloud-provider=fake", "--cloud-config=/etc/ccm/cloud-config.yaml", "--cluster-name=demo",
		"--leader-elect=true", "--leader-elect-resource-lock=leases",
		"--leader-elect-resource-name=cloud-controller-manager", "--leader-elect-resource-namespace=kube-system",
		"--configure-cloud-routes=false", "--use-service-account-credentials=false", "--secure-port=10258", "--v=2",
	}
	if diff := cmp.Diff(wantArgs, d.Spec.Template.Spec.Containers[0].Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	var role rbacv1.Role
	r.get("Role", "", &role)
	if diff := cmp.Diff([]string{"cloud-controller-manager"}, role.Rules[1].ResourceNames); diff != "" {
		t.Errorf("the leader-election Role's Lease (-want +got):\n%s", diff)
	}
}

func TestRenderValues(t *testing.T) {
	t.Run("one replica, no leader election", func(t *testing.T) {
		r := render(t, "ccm", "ops", map[string]any{"replicas": 1, "leaderElection": map[string]any{"enabled": false}})
		d := r.deployment()
		for _, k := range r.kinds() {
			if strings.HasPrefix(k, "PodDisruptionBudget") || strings.Contains(k, "leader-election") {
				t.Errorf("with one replica and no leader election, the chart renders %s", k)
			}
		}
		if d.Spec.Template.Spec.Affinity != nil {
			t.Errorf("one replica has an anti-affinity %+v", d.Spec.Template.Spec.Affinity)
		}
		args := d.Spec.Template.Spec.Containers[0].Args
		if !slices.Contains(args, "--leader-elect=false") || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--leader-elect-resource") }) {
			t.Errorf("args %v: want --leader-elect=false and no lease flags", args)
		}
	})
	t.Run("controller flags", func(t *testing.T) {
		r := render(t, "ccm", "ops", map[string]any{
			"clusterName": "prod", "cloudProvider": "acme",
			"routes":       map[string]any{"configureCloudRoutes": true, "clusterCIDR": "10.244.0.0/16"},
			"controllers":  []any{"*", "-orphan-collection"},
			"housekeeping": map[string]any{"driftRepairPeriod": "10m", "orphanCollectionPeriod": "0", "orphanGracePeriod": "1h30m"},
			"securePort":   10300, "verbosity": 4, "extraArgs": []any{"--concurrent-service-syncs=4"},
		})
		c := r.deployment().Spec.Template.Spec.Containers[0]
		want := []string{
			"--cloud-provider=acme", "--cloud-config=/etc/ccm/cloud-config.yaml", "--cluster-name=prod",
			"--leader-elect=true", "--leader-elect-resource-lock=leases",
			"--leader-elect-resource-name=cloud-controller-manager", "--leader-elect-resource-namespace=ops",
			"--configure-cloud-routes=true", "--cluster-cidr=10.244.0.0/16", "--controllers=*,-orphan-collection",
			"--drift-repair-period=10m", "--orphan-collection-period=0", "--orphan-grace-period=1h30m",
			"--use-service-account-credentials=false", "--secure-port=10300", "--v=4", "--concurrent-service-syncs=4",
		}
		if diff := cmp.Diff(want, c.Args); diff != "" {
			t.Errorf("args (-want +got):\n%s", diff)
		}
		if c.Ports[0].ContainerPort != 10300 || c.LivenessProbe.HTTPGet.Port.IntValue() != 10300 {
			t.Errorf("port %d, probe %v: want 10300", c.Ports[0].ContainerPort, c.LivenessProbe.HTTPGet.Port)
		}
	})
	t.Run("no host network, an existing Secret, options off", func(t *testing.T) {
		r := render(t, "ccm", "ops", map[string]any{
			"hostNetwork": false, "cloudConfig": map[string]any{"existingSecret": "acme-cloud", "key": "cloud.conf"},
			"admissionPolicy": map[string]any{"enabled": false}, "metrics": map[string]any{"service": map[string]any{"enabled": false}},
		})
		for _, k := range r.kinds() {
			if strings.HasPrefix(k, "Secret ") || strings.HasPrefix(k, "ValidatingAdmissionPolicy") || strings.HasPrefix(k, "Service ") {
				t.Errorf("the chart renders %s", k)
			}
		}
		spec := r.deployment().Spec.Template.Spec
		if spec.HostNetwork || spec.DNSPolicy != "" {
			t.Errorf("hostNetwork %v, dnsPolicy %q: want neither", spec.HostNetwork, spec.DNSPolicy)
		}
		if s := spec.Volumes[0].Secret.SecretName; s != "acme-cloud" || !slices.Contains(spec.Containers[0].Args, "--cloud-config=/etc/ccm/cloud.conf") {
			t.Errorf("volume's Secret %q, args %v: want acme-cloud and /etc/ccm/cloud.conf", s, spec.Containers[0].Args)
		}
	})
	t.Run("another name and namespace", func(t *testing.T) {
		r := render(t, "x", "ops", map[string]any{"fullnameOverride": "ccm-b"})
		var crb rbacv1.ClusterRoleBinding
		r.get("ClusterRoleBinding", "ccmkit:ccm-b", &crb)
		if s := crb.Subjects[0]; s.Name != "ccm-b" || s.Namespace != "ops" || crb.RoleRef.Name != "ccmkit:ccm-b" {
			t.Errorf("ClusterRoleBinding %+v: want ServiceAccount ops/ccm-b bound to ccmkit:ccm-b", crb)
		}
		var reader rbacv1.RoleBinding
		r.get("RoleBinding", "ccmkit:ccm-b:authentication-reader", &reader)
		if reader.Namespace != "kube-system" || reader.Subjects[0].Namespace != "ops" {
			t.Errorf("authentication-reader binding %+v: want it in kube-system (where the built-in Role is), for ops/ccm-b", reader)
		}
		var role rbacv1.Role
		r.get("Role", "", &role)
		if role.Namespace != "ops" || !slices.Equal(role.Rules[1].ResourceNames, []string{"ccm-b"}) {
			t.Errorf("leader-election Role %+v: want it in ops, for the Lease ccm-b", role)
		}
		var sec corev1.Secret
		r.get("Secret", "ccm-b-config", &sec)
	})
}

// TestRenderRejects: values.schema.json and the templates' required
// refuse bad values with an error naming the field.
func TestRenderRejects(t *testing.T) {
	for _, c := range []struct {
		name   string
		values map[string]any
		want   []string
	}{
		{"no replicas", map[string]any{"replicas": 0}, []string{"replicas", "minimum"}},
		{"replicas not a number", map[string]any{"replicas": "two"}, []string{"replicas", "integer"}},
		{"port out of range", map[string]any{"securePort": 70000}, []string{"securePort"}},
		{"a period that is not a duration", map[string]any{"housekeeping": map[string]any{"driftRepairPeriod": "soon"}}, []string{"driftRepairPeriod"}},
		{"a misspelt value", map[string]any{"replica": 3}, []string{"replica"}},
		{"an argument that is not a flag", map[string]any{"extraArgs": []any{"v=4"}}, []string{"extraArgs"}},
		{"no provider", map[string]any{"cloudProvider": ""}, []string{"cloudProvider"}},
		{"no cloud-config", map[string]any{"cloudConfig": map[string]any{"content": ""}}, []string{"cloudConfig.content", "expected the cloud-config"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render(load(t), "ccm", "ops", c.values)
			if err == nil {
				t.Fatalf("values %v rendered; want an error naming %v", c.values, c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("values %v: error %q, want it to name %q", c.values, err, w)
				}
			}
		})
	}
}
