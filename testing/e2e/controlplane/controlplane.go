package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/ccmkit/ccmkit/testing/e2e/internal/buildcache"
	"github.com/ccmkit/ccmkit/testing/e2e/internal/proc"
)

// Defaults for the zero Config.
const (
	DefaultServiceClusterIPRange = "10.96.0.0/16"
	DefaultStartTimeout          = 3 * time.Minute
)

// Config configures Start. The zero value is a usable default: binaries built
// into the cache, a temporary directory removed by Stop, service range
// DefaultServiceClusterIPRange, no progress output.
type Config struct {
	// Dir holds the data, certificates, logs and the admin kubeconfig.
	// Empty means a new temporary directory that Stop removes; a directory
	// given here is created if needed and kept.
	Dir string
	// EtcdBinary and APIServerBinary are the executables to run. Empty means
	// build (or reuse) them with BuildBinaries.
	EtcdBinary, APIServerBinary string
	// ServiceClusterIPRange is --service-cluster-ip-range.
	ServiceClusterIPRange string
	// StartTimeout bounds the wait for etcd and kube-apiserver to be ready,
	// not the build. Zero means DefaultStartTimeout.
	StartTimeout time.Duration
	// Progress receives one line per step ("building...", "etcd ready").
	// Nil means silent.
	Progress io.Writer
	// ExtraAPIServerArgs are appended to the kube-apiserver command line.
	ExtraAPIServerArgs []string
}

// ControlPlane is a running etcd and kube-apiserver on 127.0.0.1.
//
// Its methods are safe for concurrent use. The caller must call Stop.
type ControlPlane struct {
	dir, removeDir string
	host           string
	pki            *pki
	kubeconfig     string
	etcd, api      *proc.Process

	stopOnce sync.Once
	stopErr  error
}

// BuildBinaries returns the paths of the etcd and kube-apiserver binaries in
// the cache, building those that are missing (see package buildcache). The
// first build of kube-apiserver from a cold Go cache takes several minutes.
func BuildBinaries(ctx context.Context, progress io.Writer) (etcd, apiserver string, err error) {
	if etcd, err = buildcache.Tool(ctx, "etcd", progress); err != nil {
		return "", "", err
	}
	if apiserver, err = buildcache.Tool(ctx, "kube-apiserver", progress); err != nil {
		return "", "", err
	}
	return etcd, apiserver, nil
}

// Start builds the binaries if needed, starts etcd and then kube-apiserver on
// free loopback ports with RBAC authorization, a static admin token in
// group system:masters, service-account keys generated for this run and
// --service-cluster-ip-range, waits for etcd's /health and the API server's
// /readyz, and writes an admin kubeconfig (KubeconfigPath).
//
// ctx bounds the build and the start-up only; the processes run until Stop.
// On error everything started so far is stopped. A process that exits during
// start-up (say, a port taken between choosing and binding it) is retried
// with new ports, up to three attempts.
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	if cfg.ServiceClusterIPRange == "" {
		cfg.ServiceClusterIPRange = DefaultServiceClusterIPRange
	}
	if _, _, err := net.ParseCIDR(cfg.ServiceClusterIPRange); err != nil {
		return nil, fmt.Errorf("controlplane: Config.ServiceClusterIPRange %q: want a CIDR such as %s: %w", cfg.ServiceClusterIPRange, DefaultServiceClusterIPRange, err)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.EtcdBinary == "" || cfg.APIServerBinary == "" {
		etcd, api, err := BuildBinaries(ctx, cfg.Progress)
		if err != nil {
			return nil, err
		}
		if cfg.EtcdBinary == "" {
			cfg.EtcdBinary = etcd
		}
		if cfg.APIServerBinary == "" {
			cfg.APIServerBinary = api
		}
	}
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		cp, err := start(ctx, cfg)
		if err == nil {
			return cp, nil
		}
		lastErr = err
		var early *earlyExitError
		if !errors.As(err, &early) || ctx.Err() != nil {
			break
		}
		progressf(cfg.Progress, "attempt %d failed (%v); retrying with new ports", attempt, err)
	}
	return nil, lastErr
}

// earlyExitError reports a process that exited before it was ready.
type earlyExitError struct {
	name string
	err  error
	tail string
}

func (e *earlyExitError) Error() string {
	return fmt.Sprintf("controlplane: %s exited during start-up (%v); last log lines:\n%s", e.name, e.err, e.tail)
}

func start(ctx context.Context, cfg Config) (_ *ControlPlane, err error) {
	cp := &ControlPlane{dir: cfg.Dir}
	if cp.dir == "" {
		if cp.dir, err = os.MkdirTemp("", "ccmkit-e2e-controlplane-"); err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
		cp.removeDir = cp.dir
	} else {
		// A kept directory is reused; start from a clean etcd each time.
		if err := os.MkdirAll(cp.dir, 0o755); err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
		os.RemoveAll(filepath.Join(cp.dir, "etcd-data"))
	}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	if cp.pki, err = newPKI(cp.dir); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	deadline, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()

	progressf(cfg.Progress, "starting etcd on %s", clientURL)
	cp.etcd, err = proc.Start(proc.Config{
		Name: "etcd",
		Path: cfg.EtcdBinary,
		Args: []string{
			"--name=e2e",
			"--data-dir=" + filepath.Join(cp.dir, "etcd-data"),
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=e2e=" + peerURL,
			// The data is thrown away at the end: trade durability for
			// speed on a shared disk.
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		},
		LogPath: filepath.Join(cp.dir, "etcd.log"),
	})
	if err != nil {
		return nil, err
	}
	if err := waitReady(deadline, cp.etcd, func(ctx context.Context) error { return etcdHealthy(ctx, clientURL) }); err != nil {
		return nil, err
	}

	cp.host = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	progressf(cfg.Progress, "starting kube-apiserver on %s", cp.host)
	args := []string{
		"--etcd-servers=" + clientURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--cert-dir=" + filepath.Join(cp.dir, "apiserver-certs"),
		"--tls-cert-file=" + cp.pki.servingCert,
		"--tls-private-key-file=" + cp.pki.servingKey,
		"--client-ca-file=" + cp.pki.caFile,
		"--token-auth-file=" + cp.pki.tokenFile,
		// Fill the requestheader part of the extension-apiserver-
		// authentication ConfigMap, which delegated authentication (the
		// CCM's secure port) reads; nothing here sends such headers.
		"--requestheader-client-ca-file=" + cp.pki.caFile,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + cp.pki.saPub,
		"--service-account-signing-key-file=" + cp.pki.saKey,
		"--service-cluster-ip-range=" + cfg.ServiceClusterIPRange,
		// The "kubernetes" Service's endpoints would be 127.0.0.1, which
		// endpoint validation rejects; nothing here needs them.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--v=1",
	}
	cp.api, err = proc.Start(proc.Config{
		Name:    "kube-apiserver",
		Path:    cfg.APIServerBinary,
		Args:    append(args, cfg.ExtraAPIServerArgs...),
		LogPath: filepath.Join(cp.dir, "kube-apiserver.log"),
	})
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	if err := waitReady(deadline, cp.api, func(ctx context.Context) error {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	cp.kubeconfig = filepath.Join(cp.dir, "admin.kubeconfig")
	if err := cp.WriteKubeconfig(cp.kubeconfig, cp.pki.adminToken); err != nil {
		return nil, err
	}
	progressf(cfg.Progress, "control plane ready; kubeconfig %s", cp.kubeconfig)
	return cp, nil
}

// waitReady polls check every 200ms until it succeeds, p exits (an
// *earlyExitError) or ctx ends (an error with the last check error and the
// log tail).
func waitReady(ctx context.Context, p *proc.Process, check func(context.Context) error) error {
	var last error
	for {
		if exited, err := p.Exited(); exited {
			return &earlyExitError{name: p.Name(), err: err, tail: p.LogTail(30)}
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controlplane: %s not ready: %w (last check: %v); last log lines:\n%s", p.Name(), ctx.Err(), last, p.LogTail(30)) //nolint:errorlint // the error is ctx's; the last check is context for the reader, kept out of errors.As (Start retries on an *earlyExitError)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func etcdHealthy(ctx context.Context, clientURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("etcd /health: %s %s", resp.Status, body)
	}
	return nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1. The ports are
// free when chosen; a process may take one before it is bound (Start retries).
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("controlplane: choosing a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func progressf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// Host returns the API server URL, https://127.0.0.1:<port>.
func (cp *ControlPlane) Host() string { return cp.host }

// Dir returns the directory holding data, certificates, logs and kubeconfigs.
func (cp *ControlPlane) Dir() string { return cp.dir }

// KubeconfigPath returns the path of the admin kubeconfig (user in group
// system:masters), usable with kubectl while the control plane runs.
func (cp *ControlPlane) KubeconfigPath() string { return cp.kubeconfig }

// CAData returns the PEM CA certificate that signed the API server's
// serving certificate.
func (cp *ControlPlane) CAData() []byte { return append([]byte(nil), cp.pki.caPEM...) }

// RESTConfig returns a new admin *rest.Config (the caller may modify it),
// with QPS and Burst raised for tests that create many objects.
func (cp *ControlPlane) RESTConfig() *rest.Config {
	return cp.TokenRESTConfig(cp.pki.adminToken)
}

// TokenRESTConfig returns a *rest.Config for the API server that
// authenticates with the given bearer token (for example a ServiceAccount
// token from the TokenRequest API).
func (cp *ControlPlane) TokenRESTConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            cp.host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.CAData()},
		QPS:             200,
		Burst:           400,
	}
}

// WriteKubeconfig writes a kubeconfig for the API server that authenticates
// with token to path (mode 0600).
func (cp *ControlPlane) WriteKubeconfig(path, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cp.host, CertificateAuthorityData: cp.CAData()}
	cfg.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	cfg.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("controlplane: writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// PIDs returns the process IDs of etcd and kube-apiserver (also their
// process group IDs), for checking that Stop left nothing behind.
func (cp *ControlPlane) PIDs() []int {
	var pids []int
	for _, p := range []*proc.Process{cp.api, cp.etcd} {
		if p != nil {
			pids = append(pids, p.PID())
		}
	}
	return pids
}

// LogTail returns the last n lines of the etcd and kube-apiserver logs, for
// failure messages.
func (cp *ControlPlane) LogTail(n int) string {
	var b strings.Builder
	for _, p := range []*proc.Process{cp.etcd, cp.api} {
		if p != nil {
			fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.Name(), p.LogPath(), p.LogTail(n))
		}
	}
	return b.String()
}

// Stop stops kube-apiserver and then etcd (SIGTERM, then SIGKILL after a
// grace period, whole process groups) and removes the temporary directory
// if Start created it. It is idempotent and safe to call from t.Cleanup and
// signal handlers at once; later calls return the first call's error.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		var errs []error
		for _, p := range []*proc.Process{cp.api, cp.etcd} {
			if p != nil {
				errs = append(errs, p.Stop(15*time.Second))
			}
		}
		if cp.removeDir != "" {
			errs = append(errs, os.RemoveAll(cp.removeDir))
		}
		cp.stopErr = errors.Join(errs...)
	})
	return cp.stopErr
}
