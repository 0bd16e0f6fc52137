package register

import (
	"errors"
	"strings"
	"testing"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/admin"
	"github.com/ccmkit/ccmkit/provider"
)

func TestRegistration(t *testing.T) {
	if err := registerErr; err != nil {
		t.Fatalf("registration = %v; want nil", err)
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
	err := provider.Register("fake", Factory)
	if !errors.Is(err, provider.ErrAlreadyRegistered) {
		t.Errorf("second Register(fake) = %v; want ErrAlreadyRegistered", err)
	}
}

// TestFactoryAdmin: a cloud-config with admin.address builds an
// admin.Cloud, whose admin endpoint starts with Initialize; one without
// builds the fake.Cloud itself.
func TestFactoryAdmin(t *testing.T) {
	plain, err := Factory(&fake.Config{})
	if _, ok := plain.(*fake.Cloud); err != nil || !ok {
		t.Errorf("Factory without admin.address = %T, %v; want a *fake.Cloud", plain, err)
	}
	withAdmin, err := Factory(&fake.Config{Admin: fake.AdminSection{Address: "127.0.0.1:0"}})
	if _, ok := withAdmin.(*admin.Cloud); err != nil || !ok {
		t.Errorf("Factory with admin.address = %T, %v; want an *admin.Cloud", withAdmin, err)
	}
}
