package fake

import (
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/ccmkit/ccmkit/provider"
)

// registerErr is the result of the registration in init.
var registerErr error

// init registers the fake under ProviderName, so that importing the package
// (blank import) makes --cloud-provider=fake available. A failure (the name
// is taken) is logged and kept in registerErr; it never exits.
func init() {
	registerErr = provider.Register(ProviderName, Factory)
	if registerErr != nil {
		klog.ErrorS(registerErr, "Fake cloud provider not registered")
	}
}

// Factory builds the fake from its decoded, validated cloud-config. It is
// the factory registered under ProviderName (through provider.Register,
// which decodes --cloud-config strictly and calls Config.Validate); use it
// with provider.Build to build the fake from a cloud-config outside the
// registry.
func Factory(cfg *Config) (cloudprovider.Interface, error) {
	return New(*cfg, Options{})
}
