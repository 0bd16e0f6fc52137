package fake_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/register"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/internal/clip"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

// TestExampleCloudConfig keeps example/cloud-config.yaml, the one annotated
// sample of the cloud-config, which the example CCM's documentation runs,
// valid: it decodes strictly into Config and validates.
func TestExampleCloudConfig(t *testing.T) {
	f, err := os.Open("../example/cloud-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := provider.DecodeConfig[fake.Config](f)
	if err != nil {
		t.Fatalf("DecodeConfig(example/cloud-config.yaml) = %v, want nil", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("example/cloud-config.yaml: Validate = %v, want nil", err)
	}
	if cfg.ClusterID == "" || len(cfg.Instances) == 0 || cfg.Admin.Address == "" {
		t.Errorf("example cloud-config = %+v; want a cluster ID, instances and an admin address", cfg)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		config string
		want   []string // substrings of the error; nil: valid
	}{
		{name: "empty", reason: "every field is optional", config: ""},
		{name: "unknown field", reason: "strict decoding names the field", config: "cluster: x", want: []string{`unknown field "cluster"`}},
		{name: "public admin address", reason: "the admin endpoint has no authentication", config: "admin: {address: '0.0.0.0:8089'}",
			want: []string{"admin.address", "0.0.0.0:8089", "loopback"}},
		{name: "admin without port", reason: "host:port is required", config: "admin: {address: '127.0.0.1'}", want: []string{"admin.address", "host:port"}},
		{name: "localhost admin", reason: "localhost is loopback", config: "admin: {address: 'localhost:0'}"},
		{name: "ipv6 loopback admin", reason: "::1 is loopback", config: "admin: {address: '[::1]:9'}"},
		{name: "bad pool", reason: "pools are CIDRs", config: "loadBalancers: {ipv4Pool: 198.18.0.1/15}", want: []string{"loadBalancers.ipv4Pool", "198.18.0.1/15", "network address"}},
		{name: "pool of wrong family", reason: "ipv6Pool holds IPv6", config: "loadBalancers: {ipv6Pool: 10.0.0.0/8}", want: []string{"loadBalancers.ipv6Pool", "family"}},
		{name: "bad ip mode", reason: "VIP or Proxy", config: "loadBalancers: {ipMode: Direct}", want: []string{"loadBalancers.ipMode", "Direct"}},
		{name: "ip mode with hostname", reason: "ipMode needs an IP ingress", config: "loadBalancers: {ipMode: VIP, hostnameSuffix: lb.example}", want: []string{"loadBalancers.ipMode"}},
		{name: "two ipv4 instance CIDRs", reason: "one network per family", config: "instanceCIDRs: [10.0.0.0/16, 10.1.0.0/16]", want: []string{"instanceCIDRs", "at most one IPv4"}},
		{name: "instance without name", reason: "the name is the Node name", config: "instances: [{id: i-1}]", want: []string{"instances[0].name", "Required"}},
		{name: "instance bad ip", reason: "addresses are IPs", config: "instances: [{name: a, internalIPs: [10.0.0.300]}]", want: []string{"instances[0].internalIPs[0]", "10.0.0.300"}},
		{name: "duplicate id", reason: "IDs are unique", config: "instances: [{name: a, id: i-1}, {name: b, id: i-1}]", want: []string{"instances[1].id", "Duplicate"}},
		{name: "shared ip", reason: "an address belongs to one instance", config: "instances: [{name: a, internalIPs: [10.0.0.5]}, {name: b, internalIPs: [10.0.0.5]}]",
			want: []string{"instances[1].internalIPs[0]", `"10.0.0.5"`, "instances[0].internalIPs[0] has it"}},
		{name: "shared external ip", reason: "an external address belongs to one instance too", config: "instances: [{name: a, externalIPs: [203.0.113.1]}, {name: b, externalIPs: [203.0.113.1]}]",
			want: []string{"instances[1].externalIPs[0]", `"203.0.113.1"`, "instances[0].externalIPs[0] has it"}},
		{name: "internal ip of one, external of another", reason: "one address, two machines", config: "instances: [{name: a, internalIPs: [10.0.0.5]}, {name: b, externalIPs: [10.0.0.5]}]",
			want: []string{"instances[1].externalIPs[0]", "instances[0].internalIPs[0] has it"}},
		{name: "one instance's ip internal and external", reason: "an instance may report its address under both types, as upstream allows", config: "instances: [{name: a, internalIPs: [10.0.0.5], externalIPs: [10.0.0.5]}]"},
		{name: "duplicate name", reason: "a Node without a provider ID is looked up by name: two live instances of one name make it ambiguous",
			config: "instances: [{name: b}, {name: node-a}, {name: c}, {name: node-a}]", want: []string{"instances[3].name", `"node-a"`, "duplicates instances[1].name"}},
		{name: "duplicate name, stopped", reason: "a stopped instance is still the Node's", config: "instances: [{name: node-a, state: stopped}, {name: node-a}]",
			want: []string{"instances[1].name", "duplicates instances[0].name"}},
		{name: "duplicate name, one terminated", reason: "a terminated instance and the one that replaced it, as in a cloud", config: "instances: [{name: node-a, state: terminated}, {name: node-a}]"},
		{name: "name of 10k characters", reason: "the value is quoted cut", config: "instances: [{name: " + strings.Repeat("n", 10_000) + "}]",
			want: []string{"instances[0].name", strconv.Quote(clip.Quoted(strings.Repeat("n", 10_000))), "DNS-1123"}},
		{name: "admin address of 10k characters", reason: "the value is quoted cut, in the detail too", config: "admin: {address: '" + strings.Repeat("h", 10_000) + ":1'}",
			want: []string{"admin.address", `"hhhh`, "(10002 bytes)", "(10000 bytes)", "loopback"}},
		{name: "bad state", reason: "three states", config: "instances: [{name: a, state: paused}]", want: []string{`instances[0].state: state "paused"`, "expected one of running, stopped, terminated"}},
		{name: "kubernetes label", reason: "the node controller drops kubernetes.io labels", config: "instances: [{name: a, labels: {node.kubernetes.io/x: y}}]", want: []string{"instances[0].labels[node.kubernetes.io/x]"}},
		{name: "negative ttl", reason: "a TTL is positive", config: "instanceCacheTTL: -1s", want: []string{"instanceCacheTTL"}},
		{name: "negative load-balancer ttl", reason: "a TTL is positive", config: "loadBalancerCacheTTL: -1s", want: []string{"loadBalancerCacheTTL", `"-1s"`, "expected zero (the default) or a positive duration"}},
		{name: "load-balancer ttl", reason: "a Go duration", config: "loadBalancerCacheTTL: 30s"},
		{name: "state file", reason: "an absolute path", config: "stateFile: /run/fake/cloud.json"},
		{name: "relative state file", reason: "processes sharing it may have other working directories", config: "stateFile: cloud.json",
			want: []string{"stateFile", "cloud.json", "absolute"}},
		{name: "state file is a directory", reason: "a file, not a directory", config: "stateFile: /run/fake/", want: []string{"stateFile", "/run/fake/"}},
		{name: "cluster ID with spaces", reason: "the owner tag of load balancers and routes", config: "clusterID: ' blue'", want: []string{"clusterID", `" blue"`, "white space"}},
		{name: "realistic", reason: "a switch", config: "realistic: true"},
		{name: "provisioning delay", reason: "a duration", config: "loadBalancers: {provisioningDelay: 1m30s}"},
		{name: "no provisioning delay", reason: "0s switches the realistic delay off", config: "{realistic: true, loadBalancers: {provisioningDelay: 0s}}"},
		{name: "negative provisioning delay", reason: "time does not run backwards", config: "loadBalancers: {provisioningDelay: -1s}",
			want: []string{"loadBalancers.provisioningDelay", `"-1s"`, "zero (no delay) or a positive duration"}},
		{name: "provisioning delay without unit", reason: "provider.Duration wants a unit", config: "loadBalancers: {provisioningDelay: 5}", want: []string{"provisioningDelay", "unit"}},
		{name: "backends by instance", reason: "a mode", config: "loadBalancers: {backends: instanceID}"},
		{name: "unknown backends mode", reason: "two modes", config: "loadBalancers: {backends: address}",
			want: []string{"loadBalancers.backends", `"address"`, `"nodeName"`, `"instanceID"`}},
		{name: "rate limit", reason: "rates and a burst", config: "rateLimit: {readsPerSecond: 2.5, writesPerSecond: 1, burst: 5}"},
		{name: "realistic rate override", reason: "a field overrides its realistic default; the others stay", config: "{realistic: true, rateLimit: {writesPerSecond: 1}}"},
		{name: "zero rate", reason: "a rate is positive; unset means no limit", config: "rateLimit: {readsPerSecond: 0, burst: 1}",
			want: []string{"rateLimit.readsPerSecond", "Invalid value: 0", "positive number of calls per second"}},
		{name: "negative rate", reason: "a rate is positive", config: "rateLimit: {writesPerSecond: -2, burst: 1}",
			want: []string{"rateLimit.writesPerSecond", "-2", "positive"}},
		{name: "rate without burst", reason: "a bucket holds at least one call", config: "rateLimit: {readsPerSecond: 5}",
			want: []string{"rateLimit.burst", "Invalid value: 0", "at least 1"}},
		{name: "negative burst", reason: "a bucket holds at least one call, realistic or not", config: "{realistic: true, rateLimit: {burst: -1}}",
			want: []string{"rateLimit.burst", "-1", "at least 1"}},
		{name: "burst without rate", reason: "a burst alone limits nothing", config: "rateLimit: {burst: 5}",
			want: []string{"rateLimit.burst", "5", "readsPerSecond or writesPerSecond"}},
		{name: "hierarchical", reason: "a switch", config: "loadBalancers: {hierarchical: true}"},
		{name: "hierarchical realistic", reason: "delays, rate limits and instance members combine with it", config: "{realistic: true, loadBalancers: {hierarchical: true, busyAfterWrite: 500ms}}"},
		{name: "never busy", reason: "0s: none", config: "loadBalancers: {hierarchical: true, busyAfterWrite: 0s}"},
		{name: "negative busy", reason: "time does not run backwards", config: "loadBalancers: {busyAfterWrite: -1s}",
			want: []string{"loadBalancers.busyAfterWrite", `"-1s"`, "expected zero (never busy) or a positive duration"}},
		{name: "hierarchical shared pools", reason: "a pool per listener, not pools shared by load balancers", config: "loadBalancers: {hierarchical: true, backendPools: shared}",
			want: []string{"loadBalancers.backendPools", `"shared"`, "loadBalancers.hierarchical true", "expected perService"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := provider.DecodeConfig[fake.Config](strings.NewReader(tt.config))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("DecodeConfig(%q) = %v, want nil (%s)", tt.config, err, tt.reason)
				}
				return
			}
			if err == nil || !errors.Is(err, provider.ErrInvalidConfig) {
				t.Fatalf("DecodeConfig(%q) = %v, want an ErrInvalidConfig error (%s)", tt.config, err, tt.reason)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("DecodeConfig(%.80q) = %q, want it to contain %q (%s)", tt.config, err, w, tt.reason)
				}
			}
			if n := len(err.Error()); n > 2048 {
				t.Errorf("DecodeConfig(%.80q): error of %d bytes; want at most 2048 (values quoted cut)", tt.config, n)
			}
		})
	}
}

// TestNewChecksSeedsTogether: instances given in Options.Instances are
// checked against the cloud-config's as the cloud-config's are against
// each other, and a refused cloud creates no state file.
func TestNewChecksSeedsTogether(t *testing.T) {
	tests := []struct {
		name, reason string
		config, with []fake.Instance
		want         []string // nil: accepted
	}{
		{"same name", "a cloud-config instance and a WithInstances one of one name",
			[]fake.Instance{{Name: "node-a"}}, []fake.Instance{{Name: "node-a"}}, []string{"instances[1].name", `"node-a"`, "duplicates instances[0].name"}},
		{"same ID", "IDs are unique across both",
			[]fake.Instance{{Name: "a", ID: "i-7"}}, []fake.Instance{{Name: "b", ID: "i-7"}}, []string{"instances[1].id", `"i-7"`}},
		{"same address", "addresses too",
			[]fake.Instance{{Name: "a", InternalIPs: []string{"10.0.0.7"}}}, []fake.Instance{{Name: "b", ExternalIPs: []string{"10.0.0.7"}}},
			[]string{"instances[1].externalIPs[0]", "instances[0].internalIPs[0] has it"}},
		{"distinct", "nothing shared", []fake.Instance{{Name: "a"}}, []fake.Instance{{Name: "b"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cloud.json")
			c, err := openCloud(fake.Config{Instances: tt.config, StateFile: path}, fake.Options{Instances: tt.with})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("New = %v; want a cloud (%s)", err, tt.reason)
				}
				c.Shutdown()
				return
			}
			if err == nil {
				c.Shutdown()
				t.Fatalf("New = a cloud; want an error (%s)", tt.reason)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New = %q; want it to contain %q (%s)", err, w, tt.reason)
				}
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused New left the state file (stat: %v); want none", err)
			}
		})
	}
}

// TestDeploySecretCloudConfig keeps the cloud-config in
// example/deploy/secret.yaml valid.
func TestDeploySecretCloudConfig(t *testing.T) {
	data, err := os.ReadFile("../example/deploy/secret.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var secret v1.Secret
	if err := yaml.UnmarshalStrict(data, &secret); err != nil {
		t.Fatalf("example/deploy/secret.yaml: %v", err)
	}
	cc, ok := secret.StringData["cloud-config.yaml"]
	if !ok {
		t.Fatalf("example/deploy/secret.yaml has no stringData[cloud-config.yaml]")
	}
	if _, err := provider.Build(fake.ProviderName, strings.NewReader(cc), register.Factory); err != nil {
		t.Errorf("building the fake from example/deploy/secret.yaml: %v", err)
	}
}

// TestConfigYAMLRoundTrip: a Config marshalled to YAML (as a test harness
// writes a cloud-config) decodes back to itself.
func TestConfigYAMLRoundTrip(t *testing.T) {
	in := fake.Config{
		ClusterID:     "demo",
		InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"},
		Instances: []fake.Instance{
			{Name: "a", ID: "i-a", Zone: "z", InternalIPs: []string{"10.0.0.9"}, Labels: map[string]string{"fake.ccmkit.io/x": "y"}, State: instances.StateStopped},
			{Name: "b"},
		},
		InstanceCacheTTL:     provider.Duration{Duration: 90 * time.Second},
		LoadBalancerCacheTTL: provider.Duration{Duration: 45 * time.Second},
		LoadBalancers: fake.LoadBalancerSection{IPv4Pool: "192.0.2.0/24", IPMode: v1.LoadBalancerIPModeProxy,
			ProvisioningDelay: &provider.Duration{Duration: 1500 * time.Millisecond}, Backends: fake.BackendsInstanceID,
			Hierarchical: true, BusyAfterWrite: &provider.Duration{Duration: 250 * time.Millisecond}},
		Routes:    fake.RoutesSection{EnableNodeAddresses: true},
		Realistic: true,
		RateLimit: fake.RateLimit{ReadsPerSecond: ptr.To(2.5), WritesPerSecond: ptr.To(0.5), Burst: 3},
		Admin:     fake.AdminSection{Address: "127.0.0.1:0", AddressFile: "/tmp/x"},
		StateFile: "/tmp/cloud.json",
	}
	data, err := yaml.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := provider.DecodeConfig[fake.Config](bytes.NewReader(data))
	if err != nil {
		t.Fatalf("DecodeConfig(%s) = %v", data, err)
	}
	if diff := cmp.Diff(in, *out, fake.CmpModel); diff != "" {
		t.Errorf("round trip through\n%s\n(-want +got):\n%s", data, diff)
	}
	if _, err := provider.DecodeConfig[fake.Config](bytes.NewReader([]byte("instanceCacheTTL: 1m30s\n"))); err != nil {
		t.Errorf("a Go duration string: %v", err)
	}
}

// TestRealisticDefaults: realistic: true turns on the three realistic
// behaviours with their documented defaults, and each field set in the
// cloud-config keeps its value.
func TestRealisticDefaults(t *testing.T) {
	realistic := fake.RateLimit{ReadsPerSecond: ptr.To(fake.RealisticReadsPerSecond), WritesPerSecond: ptr.To(fake.RealisticWritesPerSecond), Burst: fake.RealisticBurst}
	tests := []struct {
		name      string
		reason    string
		config    string
		delay     time.Duration
		limit     fake.RateLimit
		byBackend loadbalancer.BackendKey // the backend key of a created load balancer
	}{
		{name: "off", reason: "the default fake is synchronous, unthrottled and keeps backends by Node name", config: "{}"},
		{name: "realistic", reason: "all three on", config: "realistic: true",
			delay: fake.RealisticProvisioningDelay, limit: realistic, byBackend: loadbalancer.BackendKeyProviderID},
		{name: "overridden", reason: "each explicit field wins, the others keep their realistic default",
			config: "{realistic: true, loadBalancers: {provisioningDelay: 0s, backends: nodeName}, rateLimit: {readsPerSecond: 7, burst: 3}}",
			limit:  fake.RateLimit{ReadsPerSecond: ptr.To(7.0), WritesPerSecond: ptr.To(fake.RealisticWritesPerSecond), Burst: 3}},
		{name: "parts without realistic", reason: "each behaviour on its own", config: "{loadBalancers: {provisioningDelay: 5s, backends: instanceID}, rateLimit: {writesPerSecond: 3, burst: 1}}",
			delay: 5 * time.Second, limit: fake.RateLimit{WritesPerSecond: ptr.To(3.0), Burst: 1}, byBackend: loadbalancer.BackendKeyProviderID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := provider.DecodeConfig[fake.Config](strings.NewReader(tt.config))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Instances = []fake.Instance{{Name: "node-01"}}
			c := newCloud(t, *cfg)
			if got := c.ProvisioningDelay(); got != tt.delay {
				t.Errorf("ProvisioningDelay() = %v; want %v (%s)", got, tt.delay, tt.reason)
			}
			if diff := cmp.Diff(tt.limit, c.RateLimit(), fake.CmpModel); diff != "" {
				t.Errorf("RateLimit() (-want +got) (%s):\n%s", tt.reason, diff)
			}
			_, err = lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("web"), []*v1.Node{mustNode(t, c, "i-1")})
			if (err != nil) != (tt.delay > 0) {
				t.Errorf("EnsureLoadBalancer = %v; want an error only with a provisioning delay (%s)", err, tt.reason)
			}
			if got := c.Snapshot().LoadBalancers[0].Spec.BackendKey; got != tt.byBackend {
				t.Errorf("backendKey of the created load balancer = %q; want %q (%s)", got, tt.byBackend, tt.reason)
			}
		})
	}
}
