package ccm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ccmkit/ccmkit/testing/e2e/internal/buildcache"
	"github.com/ccmkit/ccmkit/testing/e2e/internal/proc"
)

// BuildOptions configure Build. The zero value is a plain build.
type BuildOptions struct {
	// Race builds with the race detector (go build -race): the CCM then
	// logs "WARNING: DATA RACE" (see RaceReport) for every data race the
	// upstream controllers and ccmkit's code run into.
	Race bool
}

// Build builds github.com/ccmkit/ccmkit/example (the source tree's, through
// the replace directive of testing/e2e/go.mod) into dir and returns the
// binary's path. It always runs `go build` (cheap when nothing changed,
// thanks to the Go build cache), so the binary matches the checked-out
// source.
//
// The build runs in the testing/e2e module, where the example is a tool
// (the go.mod's tool directive), not in the root module: the dependencies
// then have this module's versions, which are also the tool module's
// (buildcache.TestSharedVersions), so a cold first run compiles client-go,
// the API types and the rest once for the demo or the tests, the servers
// and the CCM, instead of once per module. A provider's own build uses its
// module's versions, of course; the root module's minimums are built by
// its own tests and by the image (package image).
func Build(ctx context.Context, dir string, opts BuildOptions) (string, error) {
	mod, err := buildcache.ModuleDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "example-ccm")
	var flags []string
	if opts.Race {
		out += "-race"
		flags = append(flags, "-race")
	}
	if err := buildcache.GoBuild(ctx, mod, "github.com/ccmkit/ccmkit/example", out, flags...); err != nil {
		return "", err
	}
	return out, nil
}

// raceLine starts every report of the race detector; raceEnd ends it.
const (
	raceLine = "WARNING: DATA RACE"
	raceEnd  = "=================="
)

// knownUpstreamRaces are data races in upstream code that ccmkit cannot
// fix. A report that contains every frame of an entry is not returned by
// RaceReport.
var knownUpstreamRaces = []struct {
	why    string
	frames []string
}{
	{
		why: "k8s.io/cloud-provider v0.37.2 service controller: processServiceCreateOrUpdate assigns cachedService.state " +
			"without serviceCache.mu (controllers/service/controller.go:339) while the node syncer reads it in " +
			"serviceCache.allServices under the read lock (controller.go:503); seen when a Service update and a node sync overlap",
		frames: []string{
			"k8s.io/cloud-provider/controllers/service.(*serviceCache).allServices(",
			"k8s.io/cloud-provider/controllers/service.(*Controller).processServiceCreateOrUpdate(",
		},
	},
}

// RaceReport returns the first data-race report in the CCM's log (up to 60
// lines) that is not one of knownUpstreamRaces, or "" if there is none.
// Only a binary built with BuildOptions.Race reports races.
func (c *Process) RaceReport() string {
	b, err := os.ReadFile(c.p.LogPath())
	if err != nil {
		return ""
	}
	rest := string(b)
	for {
		i := strings.Index(rest, raceLine)
		if i < 0 {
			return ""
		}
		rest = rest[i:] // from this report's first line
		report, next, _ := strings.Cut(rest, raceEnd)
		if !knownRace(report) {
			lines := strings.SplitN(rest, "\n", 61)
			return strings.Join(lines[:min(len(lines), 60)], "\n")
		}
		rest = next
	}
}

func knownRace(report string) bool {
	for _, k := range knownUpstreamRaces {
		all := true
		for _, f := range k.frames {
			all = all && strings.Contains(report, f)
		}
		if all {
			return true
		}
	}
	return false
}

// Config describes one CCM process. Binary, Kubeconfig and LogPath are
// required; the zero value of every other field is a documented default.
type Config struct {
	// Binary is the CCM executable (from Build).
	Binary string
	// Name labels the process in errors and logs ("ccm-a").
	Name string
	// Kubeconfig is --kubeconfig.
	Kubeconfig string
	// CloudProvider is --cloud-provider; empty means "fake".
	CloudProvider string
	// CloudConfig is --cloud-config; empty passes no cloud-config.
	CloudConfig string
	// LogPath receives the process's stdout and stderr.
	LogPath string

	// LeaderElect turns --leader-elect on, with LeaseName as
	// --leader-elect-resource-name (in kube-system) and short timings
	// (lease 4s, renew 3s, retry 500ms) so that a takeover happens within
	// seconds. Off means --leader-elect=false.
	LeaderElect bool
	// LeaseName is the Lease name; empty means "cloud-controller-manager".
	// Give each scenario its own so that they never contend.
	LeaseName string

	// ClusterCIDR, when set, turns the route controller on
	// (--configure-cloud-routes=true --cluster-cidr=ClusterCIDR). Empty
	// means --configure-cloud-routes=false.
	ClusterCIDR string
	// ClusterName is --cluster-name; empty keeps the upstream default.
	ClusterName string

	// NodeMonitorPeriod is --node-monitor-period of the node-lifecycle
	// controller; zero means 1s (upstream default 5s).
	NodeMonitorPeriod time.Duration
	// RouteReconciliationPeriod is --route-reconciliation-period; zero means
	// 2s (upstream default 10s).
	RouteReconciliationPeriod time.Duration
	// NodeStatusUpdateFrequency is --node-status-update-frequency; zero
	// means the upstream default (5m).
	NodeStatusUpdateFrequency time.Duration
	// ConcurrentServiceSyncs and ConcurrentNodeSyncs are the matching
	// flags; zero keeps the upstream defaults (1 each).
	ConcurrentServiceSyncs, ConcurrentNodeSyncs int
	// KubeAPIQPS and KubeAPIBurst are --kube-api-qps/--kube-api-burst; zero
	// keeps the upstream defaults (20/30).
	KubeAPIQPS, KubeAPIBurst int
	// SecurePort, when positive, serves the CCM's secure port (upstream
	// SecureServing: /metrics, /healthz) on 127.0.0.1:SecurePort with a
	// self-signed certificate, authenticating and authorizing requests
	// through the API server of Kubeconfig (--authentication-kubeconfig,
	// --authorization-kubeconfig: TokenReview, SubjectAccessReview), as a
	// cluster runs it. Zero means --secure-port=0, no serving; negative is
	// an error.
	SecurePort int
	// Verbosity is --v; zero means 2.
	Verbosity int
	// ExtraArgs are appended last, so they override the above.
	ExtraArgs []string
}

// Args returns the command line (without the program name) for c. It fails
// when a required field is empty.
func (c Config) Args() ([]string, error) {
	if c.Kubeconfig == "" {
		return nil, errors.New("ccm: Config.Kubeconfig is empty: want the path of a kubeconfig")
	}
	provider := c.CloudProvider
	if provider == "" {
		provider = "fake"
	}
	serving, err := c.servingArgs()
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--cloud-provider=" + provider,
		"--kubeconfig=" + c.Kubeconfig,
	}, serving...)
	if c.CloudConfig != "" {
		args = append(args, "--cloud-config="+c.CloudConfig)
	}
	if c.LeaderElect {
		lease := c.LeaseName
		if lease == "" {
			lease = "cloud-controller-manager"
		}
		args = append(args,
			"--leader-elect=true",
			"--leader-elect-resource-name="+lease,
			"--leader-elect-resource-namespace=kube-system",
			"--leader-elect-lease-duration=4s",
			"--leader-elect-renew-deadline=3s",
			"--leader-elect-retry-period=500ms",
		)
	} else {
		args = append(args, "--leader-elect=false")
	}
	if c.ClusterCIDR != "" {
		args = append(args, "--configure-cloud-routes=true", "--allocate-node-cidrs=false", "--cluster-cidr="+c.ClusterCIDR)
	} else {
		args = append(args, "--configure-cloud-routes=false")
	}
	if c.ClusterName != "" {
		args = append(args, "--cluster-name="+c.ClusterName)
	}
	args = append(args,
		"--node-monitor-period="+orDuration(c.NodeMonitorPeriod, time.Second).String(),
		"--route-reconciliation-period="+orDuration(c.RouteReconciliationPeriod, 2*time.Second).String(),
	)
	if c.NodeStatusUpdateFrequency > 0 {
		args = append(args, "--node-status-update-frequency="+c.NodeStatusUpdateFrequency.String())
	}
	if c.ConcurrentServiceSyncs > 0 {
		args = append(args, "--concurrent-service-syncs="+strconv.Itoa(c.ConcurrentServiceSyncs))
	}
	if c.ConcurrentNodeSyncs > 0 {
		args = append(args, "--concurrent-node-syncs="+strconv.Itoa(c.ConcurrentNodeSyncs))
	}
	if c.KubeAPIQPS > 0 {
		args = append(args, "--kube-api-qps="+strconv.Itoa(c.KubeAPIQPS))
	}
	if c.KubeAPIBurst > 0 {
		args = append(args, "--kube-api-burst="+strconv.Itoa(c.KubeAPIBurst))
	}
	v := c.Verbosity
	if v == 0 {
		v = 2
	}
	args = append(args, "--v="+strconv.Itoa(v))
	return append(args, c.ExtraArgs...), nil
}

// servingArgs returns the flags of the secure port (see SecurePort).
func (c Config) servingArgs() ([]string, error) {
	switch {
	case c.SecurePort < 0:
		return nil, fmt.Errorf("ccm: Config.SecurePort %d: expected 0 (no serving) or a TCP port", c.SecurePort)
	case c.SecurePort == 0:
		// No serving: with port 0 the delegated authn/authz kubeconfigs
		// are not needed (options.CloudControllerManagerOptions.ApplyTo).
		return []string{"--secure-port=0"}, nil
	}
	return []string{
		"--secure-port=" + strconv.Itoa(c.SecurePort), "--bind-address=127.0.0.1",
		"--authentication-kubeconfig=" + c.Kubeconfig, "--authorization-kubeconfig=" + c.Kubeconfig,
	}, nil
}

func orDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Process is a running CCM. Its methods are safe for concurrent use.
type Process struct {
	p *proc.Process
}

// Start starts the CCM described by cfg and returns at once; use WaitStarted
// to wait for it to become leader (or to start its controllers). The caller
// must call Stop or Kill.
func Start(cfg Config) (*Process, error) {
	if cfg.Binary == "" {
		return nil, errors.New("ccm: Config.Binary is empty: want the path from ccm.Build")
	}
	if cfg.LogPath == "" {
		return nil, errors.New("ccm: Config.LogPath is empty: want a file for the CCM's output")
	}
	args, err := cfg.Args()
	if err != nil {
		return nil, err
	}
	name := cfg.Name
	if name == "" {
		name = "ccm"
	}
	p, err := proc.Start(proc.Config{Name: name, Path: cfg.Binary, Args: args, LogPath: cfg.LogPath})
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Name returns Config.Name.
func (c *Process) Name() string { return c.p.Name() }

// PID returns the process ID (also its process group ID).
func (c *Process) PID() int { return c.p.PID() }

// LogPath returns Config.LogPath.
func (c *Process) LogPath() string { return c.p.LogPath() }

// Usage returns the resident memory (now and peak) and CPU time the CCM has
// used so far, or an error once it has exited.
func (c *Process) Usage() (proc.Usage, error) { return c.p.Usage() }

// LogTail returns the last n lines of the CCM's log.
func (c *Process) LogTail(n int) string { return c.p.LogTail(n) }

// Done is closed once the process has exited.
func (c *Process) Done() <-chan struct{} { return c.p.Done() }

// Exited reports whether the process has exited and with what error.
func (c *Process) Exited() (bool, error) { return c.p.Exited() }

// Stop stops the CCM gracefully (SIGTERM, SIGKILL after 10s).
func (c *Process) Stop() error { return c.p.Stop(10 * time.Second) }

// Kill kills the CCM at once (SIGKILL), as a crash would.
func (c *Process) Kill() error { return c.p.Kill() }

// leaderLine is logged by k8s.io/client-go/tools/leaderelection
// (LeaderElector.acquire) once the lease is held.
const leaderLine = "Successfully acquired lease"

// IsLeader reports whether the CCM's log says it acquired its lease. Always
// false when leader election is off.
func (c *Process) IsLeader() bool {
	b, err := os.ReadFile(c.p.LogPath())
	return err == nil && strings.Contains(string(b), leaderLine)
}

// WaitLeader waits until the CCM logs that it acquired its lease, it exits,
// or ctx ends. The error says which, with the tail of the log.
func (c *Process) WaitLeader(ctx context.Context) error {
	for {
		if c.IsLeader() {
			return nil
		}
		if exited, err := c.Exited(); exited {
			return fmt.Errorf("ccm %s exited (%v) before acquiring its lease; last log lines:\n%s", c.Name(), err, c.LogTail(40)) //nolint:errorlint // err is nil for a zero exit status: %v prints <nil> where %w would print %!w(<nil>)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ccm %s: waiting for %q in its log: %w; last log lines:\n%s", c.Name(), leaderLine, ctx.Err(), c.LogTail(40))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
