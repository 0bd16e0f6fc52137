package fake_test

import (
	"errors"
	"strings"
	"testing"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/provider"
)

func TestAccessors(t *testing.T) {
	c := newCloud(t, fake.Config{ClusterID: "demo"})
	var cp cloudprovider.Interface = c
	if _, ok := cp.LoadBalancer(); !ok {
		t.Error("LoadBalancer() = false; the service controller fails to start without it")
	}
	instancesOf(t, cp)
	routesOf(t, cp)
	// Absent capabilities are (nil, false), never a typed nil with true.
	if v, ok := cp.Instances(); ok || v != nil {
		t.Errorf("Instances() = %v, %v; want nil, false", v, ok)
	}
	if v, ok := cp.Zones(); ok || v != nil {
		t.Errorf("Zones() = %v, %v; want nil, false (InstancesV2 replaces it)", v, ok)
	}
	if v, ok := cp.Clusters(); ok || v != nil {
		t.Errorf("Clusters() = %v, %v; want nil, false", v, ok)
	}
	if cp.ProviderName() != "fake" || !cp.HasClusterID() {
		t.Errorf("ProviderName, HasClusterID = %q, %v; want fake, true", cp.ProviderName(), cp.HasClusterID())
	}
	if newCloud(t, fake.Config{}).HasClusterID() {
		t.Error("HasClusterID() without clusterID = true; want false")
	}
}

func TestRegistration(t *testing.T) {
	if err := fake.RegisterError(); err != nil {
		t.Fatalf("RegisterError() = %v; want nil", err)
	}
	tests := []struct {
		name    string
		reason  string
		config  *string
		wantErr string
	}{
		{name: "no cloud-config", reason: "the factory gets a nil reader without --cloud-config", config: nil},
		{name: "valid", reason: "the example format", config: ptr.To("clusterID: demo\ninstances: [{name: node-a}]\n")},
		{name: "json", reason: "JSON is YAML", config: ptr.To(`{"clusterID": "demo"}`)},
		{name: "unknown field", reason: "strict decoding", config: ptr.To("clusterID: demo\ninstance: []\n"), wantErr: `unknown field "instance"`},
		{name: "invalid value", reason: "Validate runs", config: ptr.To("admin: {address: '10.1.2.3:80'}"), wantErr: "admin.address"},
		{name: "not yaml", reason: "garbage is an error, not a panic", config: ptr.To("\x00{[}"), wantErr: "invalid cloud-config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cloud cloudprovider.Interface
			var err error
			if tt.config == nil {
				cloud, err = cloudprovider.GetCloudProvider("fake", nil)
			} else {
				cloud, err = cloudprovider.GetCloudProvider("fake", strings.NewReader(*tt.config))
			}
			if tt.wantErr == "" {
				if err != nil || cloud == nil || cloud.ProviderName() != "fake" {
					t.Fatalf("GetCloudProvider = %v, %v; want the fake (%s)", cloud, err, tt.reason)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("GetCloudProvider = %v; want an error containing %q (%s)", err, tt.wantErr, tt.reason)
			}
		})
	}
	// A second registration of the name is an error, not a fatal exit.
	err := provider.Register("fake", fake.Factory)
	if !errors.Is(err, provider.ErrAlreadyRegistered) {
		t.Errorf("second Register(fake) = %v; want ErrAlreadyRegistered", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := fake.New(fake.Config{LoadBalancers: fake.LoadBalancerSection{IPv4Pool: "nonsense"}}, fake.Options{})
	if err == nil || !strings.Contains(err.Error(), "loadBalancers.ipv4Pool") {
		t.Errorf("New with a bad pool = %v; want an error naming loadBalancers.ipv4Pool", err)
	}
	_, err = fake.New(fake.Config{}, fake.Options{Instances: []fake.Instance{{Name: "Bad_Name"}}})
	if !errors.Is(err, fake.ErrInvalidInstance) || !strings.Contains(err.Error(), "Bad_Name") {
		t.Errorf("New with a bad instance = %v; want ErrInvalidInstance naming the value", err)
	}
}

func TestSnapshotIsACopy(t *testing.T) {
	c, _ := cloudWithNodes(t, fake.Config{ClusterID: "demo"}, 2)
	s := c.Snapshot()
	s.Instances[0].Name = "changed"
	s.Instances[0].InternalIPs[0] = "changed"
	if got := c.Snapshot(); got.Instances[0].Name != "node-01" || got.Instances[0].InternalIPs[0] != "10.0.0.1" {
		t.Errorf("modifying a snapshot changed the cloud: %+v", got.Instances[0])
	}
	if s.ClusterID != "demo" || len(s.AddressPools) != 3 {
		t.Errorf("snapshot = %+v; want clusterID demo and 3 pools", s)
	}
}
