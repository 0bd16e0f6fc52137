package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/controlplane"
	"github.com/ccmkit/ccmkit/testing/e2e/internal/proc"
)

// shared is what TestMain starts once for every scenario of this binary.
var shared struct {
	cp        *controlplane.ControlPlane
	client    kubernetes.Interface
	ccmBinary string
	// setupErr is set when the control plane or the CCM could not be
	// built or started; every scenario then fails with it.
	setupErr error
}

// setupTimeout bounds building etcd, kube-apiserver and the CCM and starting
// the control plane. A cold build of kube-apiserver on 2 shared cores takes
// several minutes.
const setupTimeout = 25 * time.Minute

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(runWithControlPlane(m))
}

func runWithControlPlane(m *testing.M) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "ccmkit-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	start := time.Now()
	shared.cp, shared.setupErr = controlplane.Start(ctx, controlplane.Config{Progress: prefixWriter("e2e setup: ")})
	if shared.setupErr == nil {
		shared.client, shared.setupErr = kubernetes.NewForConfig(shared.cp.RESTConfig())
	}
	if shared.setupErr == nil {
		shared.ccmBinary, shared.setupErr = ccm.Build(ctx, dir, ccm.BuildOptions{Race: true})
	}
	if shared.setupErr != nil {
		fmt.Fprintln(os.Stderr, "e2e setup failed:", shared.setupErr)
	} else {
		fmt.Fprintf(os.Stderr, "e2e setup: control plane and CCM ready in %s\n", time.Since(start).Round(time.Second))
	}

	code = m.Run()

	if shared.cp != nil {
		pids := shared.cp.PIDs()
		if err := shared.cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping the control plane:", err)
			code = 1
		}
		// Nothing the binary started may outlive it.
		for _, pid := range pids {
			if proc.Alive(pid) || proc.GroupAlive(pid) {
				fmt.Fprintf(os.Stderr, "e2e: FAIL: control-plane process (group) %d still alive after Stop\n", pid)
				code = 1
			}
		}
	}
	return code
}

type prefixWriter string

func (p prefixWriter) Write(b []byte) (int, error) {
	fmt.Fprintf(os.Stderr, "%s%s", p, b)
	return len(b), nil
}
