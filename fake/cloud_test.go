package fake_test

import (
	"errors"
	"strings"
	"testing"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/fake"
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
