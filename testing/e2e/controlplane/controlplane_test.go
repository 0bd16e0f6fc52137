package controlplane_test

import (
	"os"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ccmkit/ccmkit/testing/e2e/controlplane"
	"github.com/ccmkit/ccmkit/testing/e2e/internal/proc"
)

// TestStartStop starts a control plane, checks that the admin kubeconfig
// works, that RBAC is enforced on a ServiceAccount token from the
// TokenRequest API, and that Stop leaves no process and no directory behind.
func TestStartStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	ctx := t.Context()
	cp, err := controlplane.Start(ctx, controlplane.Config{Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Stop() })

	// The admin kubeconfig on disk works.
	restCfg, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath())
	if err != nil {
		t.Fatalf("loading %s: %v", cp.KubeconfigPath(), err)
	}
	admin := kubernetes.NewForConfigOrDie(restCfg)
	// kube-apiserver reports the release it is built from (buildcache
	// ToolFlags), not v0.0.0-master.
	if v, err := admin.Discovery().ServerVersion(); err != nil || !strings.HasPrefix(v.GitVersion, "v1.") || v.Major != "1" {
		t.Errorf("/version = %+v, %v: want the v1.x release of the tool module", v, err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cp-test"}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin creating a namespace: %v", err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody", Namespace: "cp-test"}}
	if _, err := admin.CoreV1().ServiceAccounts("cp-test").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A token for the ServiceAccount, signed with the generated key.
	tr, err := admin.CoreV1().ServiceAccounts("cp-test").CreateToken(ctx, "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	nobody := kubernetes.NewForConfigOrDie(cp.TokenRESTConfig(tr.Status.Token))
	_, err = nobody.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("listing nodes as an unbound ServiceAccount: err = %v, want Forbidden (RBAC on, token authenticated)", err)
	}
	if !strings.Contains(err.Error(), "system:serviceaccount:cp-test:nobody") {
		t.Errorf("Forbidden error %q does not name the ServiceAccount user: token not authenticated?", err)
	}

	pids := cp.PIDs()
	if len(pids) != 2 {
		t.Fatalf("PIDs() = %v, want etcd and kube-apiserver", pids)
	}
	dir := cp.Dir()
	if err := cp.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, pid := range pids {
		if proc.Alive(pid) || proc.GroupAlive(pid) {
			t.Errorf("process (group) %d still alive after Stop", pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temporary directory %s still there after Stop (stat err %v)", dir, err)
	}
}

func TestStartRejectsBadConfig(t *testing.T) {
	_, err := controlplane.Start(t.Context(), controlplane.Config{ServiceClusterIPRange: "10.0.0.0/33", EtcdBinary: "/bin/false", APIServerBinary: "/bin/false"})
	if err == nil || !strings.Contains(err.Error(), "ServiceClusterIPRange") || !strings.Contains(err.Error(), "10.0.0.0/33") {
		t.Errorf("Start with a bad service range: err = %v, want an error naming the field and value", err)
	}
}

// TestStartReportsEarlyExit checks that a server that dies during start-up
// is reported with its log rather than waited for until the timeout.
func TestStartReportsEarlyExit(t *testing.T) {
	_, err := controlplane.Start(t.Context(), controlplane.Config{EtcdBinary: "/bin/false", APIServerBinary: "/bin/false"})
	if err == nil || !strings.Contains(err.Error(), "etcd exited during start-up") {
		t.Errorf("Start with a failing etcd: err = %v, want an early-exit error", err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
