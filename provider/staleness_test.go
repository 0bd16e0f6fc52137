package provider_test

import (
	"testing"
	"time"
)

// TestComposedCloudMaxStaleness checks MaxStaleness up a Cloud composed
// from ccmkit's caches and adapters (acmeCloud): Cache, adapter, Cloud.
func TestComposedCloudMaxStaleness(t *testing.T) {
	tests := []struct {
		name                           string
		reason                         string
		instancesTTL, loadBalancersTTL time.Duration
		want                           time.Duration
	}{
		{name: "defaults", reason: "both caches' default TTL, one minute", want: time.Minute},
		{name: "instances longer", reason: "the instances cache's minute, not the load balancers' 10s",
			instancesTTL: time.Minute, loadBalancersTTL: 10 * time.Second, want: time.Minute},
		{name: "load balancers longer", reason: "the load-balancer cache's 3m, not the instances' 10s",
			instancesTTL: 10 * time.Second, loadBalancersTTL: 3 * time.Minute, want: 3 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cloud, err := acmeCloud(tt.instancesTTL, tt.loadBalancersTTL)
			if err != nil {
				t.Fatal(err)
			}
			if got := cloud.MaxStaleness(); got != tt.want {
				t.Errorf("MaxStaleness() = %v, want %v (%s)", got, tt.want, tt.reason)
			}
		})
	}
}
