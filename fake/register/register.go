package register

import (
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/admin"
	"github.com/ccmkit/ccmkit/fake/statefile"
	"github.com/ccmkit/ccmkit/provider"
)

// registerErr is the result of the registration in init.
var registerErr error

// init registers the fake under fake.ProviderName, so that importing the
// package (blank import) makes --cloud-provider=fake available. A failure
// (the name is taken) is logged and kept in registerErr; it never exits.
func init() {
	registerErr = provider.Register(fake.ProviderName, Factory)
	if registerErr != nil {
		klog.ErrorS(registerErr, "Fake cloud provider not registered")
	}
}

// Factory builds the fake from its decoded, validated cloud-config: a
// fake.Cloud (fake.New), over the state file (statefile.Open) with
// stateFile, and with admin.address an admin.Cloud serving its admin
// endpoint from Initialize. It is the factory registered under
// fake.ProviderName (through provider.Register, which decodes
// --cloud-config strictly and calls Config.Validate); use it with
// provider.Build to build the fake from a cloud-config outside the
// registry. Its errors are statefile.Open's, fake.New's and admin.New's.
func Factory(cfg *fake.Config) (cloudprovider.Interface, error) {
	var opts fake.Options
	if cfg.StateFile != "" {
		f, err := statefile.Open(cfg.StateFile)
		if err != nil {
			return nil, err
		}
		opts.Persistence = f
	}
	c, err := fake.New(*cfg, opts)
	if err != nil {
		return nil, err
	}
	if cfg.Admin.Address == "" {
		return c, nil
	}
	return admin.New(c, admin.Options{AdminSection: cfg.Admin})
}
