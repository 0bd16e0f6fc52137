package ccm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestArgs(t *testing.T) {
	base := []string{"--cloud-provider=fake", "--kubeconfig=/k", "--secure-port=0"}
	tests := []struct {
		name   string
		reason string
		cfg    Config
		want   []string
	}{
		{
			name:   "defaults",
			reason: "no leader election, no routes, fast node monitor and route periods, --v=2",
			cfg:    Config{Kubeconfig: "/k"},
			want: append(base[:len(base):len(base)],
				"--leader-elect=false", "--configure-cloud-routes=false",
				"--node-monitor-period=1s", "--route-reconciliation-period=2s", "--v=2"),
		},
		{
			name:   "everything",
			reason: "every field maps to its upstream flag; extra args come last",
			cfg: Config{
				Kubeconfig: "/k", CloudProvider: "other", CloudConfig: "/c.yaml",
				LeaderElect: true, LeaseName: "lease-x",
				ClusterCIDR: "10.244.0.0/16", ClusterName: "c1",
				NodeMonitorPeriod: 3 * time.Second, RouteReconciliationPeriod: time.Minute,
				NodeStatusUpdateFrequency: 10 * time.Second,
				ConcurrentServiceSyncs:    5, ConcurrentNodeSyncs: 4, KubeAPIQPS: 100, KubeAPIBurst: 200,
				Verbosity: 4, ExtraArgs: []string{"--v=5"},
			},
			want: []string{
				"--cloud-provider=other", "--kubeconfig=/k", "--secure-port=0", "--cloud-config=/c.yaml",
				"--leader-elect=true", "--leader-elect-resource-name=lease-x", "--leader-elect-resource-namespace=kube-system",
				"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
				"--configure-cloud-routes=true", "--allocate-node-cidrs=false", "--cluster-cidr=10.244.0.0/16",
				"--cluster-name=c1", "--node-monitor-period=3s", "--route-reconciliation-period=1m0s",
				"--node-status-update-frequency=10s", "--concurrent-service-syncs=5", "--concurrent-node-syncs=4",
				"--kube-api-qps=100", "--kube-api-burst=200", "--v=4", "--v=5",
			},
		},
		{
			name:   "secure port",
			reason: "the secure port on loopback, authn and authz delegated to the API server of the kubeconfig",
			cfg:    Config{Kubeconfig: "/k", SecurePort: 10258},
			want: []string{"--cloud-provider=fake", "--kubeconfig=/k",
				"--secure-port=10258", "--bind-address=127.0.0.1", "--authentication-kubeconfig=/k", "--authorization-kubeconfig=/k",
				"--leader-elect=false", "--configure-cloud-routes=false",
				"--node-monitor-period=1s", "--route-reconciliation-period=2s", "--v=2"},
		},
		{
			name:   "default lease name",
			reason: "leader election without a lease name uses the upstream default name",
			cfg:    Config{Kubeconfig: "/k", LeaderElect: true},
			want: append(base[:len(base):len(base)],
				"--leader-elect=true", "--leader-elect-resource-name=cloud-controller-manager", "--leader-elect-resource-namespace=kube-system",
				"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
				"--configure-cloud-routes=false", "--node-monitor-period=1s", "--route-reconciliation-period=2s", "--v=2"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.Args()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s: Args() (-want +got):\n%s", tt.reason, diff)
			}
		})
	}
}

func TestStartRejectsIncompleteConfig(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		cfg    Config
		want   string
	}{
		{name: "no binary", reason: "the binary is required", cfg: Config{Kubeconfig: "/k", LogPath: "/l"}, want: "Config.Binary"},
		{name: "no log", reason: "the log path is required", cfg: Config{Binary: "/bin/true", Kubeconfig: "/k"}, want: "Config.LogPath"},
		{name: "no kubeconfig", reason: "the kubeconfig is required", cfg: Config{Binary: "/bin/true", LogPath: "/l"}, want: "Config.Kubeconfig"},
		{name: "negative port", reason: "a port is 0 or positive", cfg: Config{Binary: "/bin/true", Kubeconfig: "/k", LogPath: "/l", SecurePort: -1}, want: "Config.SecurePort -1: expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Start(tt.cfg)
			if err == nil {
				p.Kill()
				t.Fatalf("%s: Start succeeded, want an error naming %s", tt.reason, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: error %q does not name %s", tt.reason, err, tt.want)
			}
		})
	}
}

// TestWaitLeader runs stand-in scripts in place of the CCM: one prints the
// client-go leader-election line, one exits without it.
func TestWaitLeader(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	leader, err := Start(Config{Name: "leader", Kubeconfig: "/k", LogPath: filepath.Join(dir, "leader.log"),
		Binary: script("leader", `echo 'I1129 leaderelection.go:272] "Successfully acquired lease" lock="kube-system/x"'; exec sleep 300`)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leader.Kill() })
	if err := leader.WaitLeader(t.Context()); err != nil {
		t.Fatalf("WaitLeader on a process that logged the lease line: %v", err)
	}
	if !leader.IsLeader() {
		t.Error("IsLeader() = false after WaitLeader returned nil")
	}

	crash, err := Start(Config{Name: "crash", Kubeconfig: "/k", LogPath: filepath.Join(dir, "crash.log"),
		Binary: script("crash", `echo "F1129 cannot build cloud: bad config"; exit 3`)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { crash.Kill() })
	err = crash.WaitLeader(t.Context())
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "bad config") {
		t.Errorf("WaitLeader on a crashing process: err = %v, want an exit error with the log tail", err)
	}
	if crash.IsLeader() {
		t.Error("IsLeader() = true for a process that never logged the lease line")
	}
}

func TestRaceReport(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "racy")
	body := "#!/bin/sh\necho starting\necho '=================='\necho 'WARNING: DATA RACE'\necho 'Write at 0x00c by goroutine 7:'\necho '  main.f()'\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := Start(Config{Binary: script, Kubeconfig: "/k", LogPath: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	got := p.RaceReport()
	if !strings.HasPrefix(got, "WARNING: DATA RACE\nWrite at 0x00c by goroutine 7:") {
		t.Errorf("RaceReport() = %q, want the report from its first line", got)
	}
	// A known upstream race is skipped; a race after it is reported.
	known := "echo '=================='\necho 'WARNING: DATA RACE'\necho 'Read at 0x1 by goroutine 3:'\n" +
		"echo '  k8s.io/cloud-provider/controllers/service.(*serviceCache).allServices()'\n" +
		"echo 'Previous write at 0x1 by goroutine 2:'\n" +
		"echo '  k8s.io/cloud-provider/controllers/service.(*Controller).processServiceCreateOrUpdate()'\necho '=================='\n"
	for _, tc := range []struct {
		name, body, want string
	}{
		{"known only", "#!/bin/sh\n" + known, ""},
		{"known then ours", "#!/bin/sh\n" + known + "echo 'WARNING: DATA RACE'\necho 'Write at 0x2 by goroutine 9:'\necho '  github.com/ccmkit/ccmkit/fake.f()'\n",
			"WARNING: DATA RACE\nWrite at 0x2 by goroutine 9:"},
	} {
		script := filepath.Join(dir, "racy-"+strings.ReplaceAll(tc.name, " ", "-"))
		if err := os.WriteFile(script, []byte(tc.body), 0o755); err != nil {
			t.Fatal(err)
		}
		p, err := Start(Config{Binary: script, Kubeconfig: "/k", LogPath: script + ".log"})
		if err != nil {
			t.Fatal(err)
		}
		<-p.Done()
		if got := p.RaceReport(); (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: RaceReport() = %q, want a report starting with %q (empty: none)", tc.name, got, tc.want)
		}
	}
	clean, err := Start(Config{Binary: "/bin/true", Kubeconfig: "/k", LogPath: filepath.Join(dir, "clean.log")})
	if err != nil {
		t.Fatal(err)
	}
	<-clean.Done()
	if got := clean.RaceReport(); got != "" {
		t.Errorf("RaceReport() of a clean log = %q, want empty", got)
	}
}
