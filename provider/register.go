package provider

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/internal/check"
)

// Factory builds a provider from its decoded and validated configuration.
// It must not call Register or cloudprovider.RegisterCloudProvider: it runs
// while the upstream registry lock is held (k8s.io/cloud-provider
// plugins.go, GetCloudProvider).
type Factory[C any] func(cfg *C) (cloudprovider.Interface, error)

// ErrAlreadyRegistered is returned by Register for a name that is already
// registered, by ccmkit or directly with cloudprovider.RegisterCloudProvider.
var ErrAlreadyRegistered = errors.New("cloud provider already registered")

var (
	registerMu sync.Mutex
	registered []string // names registered by Register, in order
)

// Register registers factory under name with the upstream registry
// (cloudprovider.RegisterCloudProvider), so that --cloud-provider=name in a
// cloud-controller-manager built on k8s.io/cloud-provider/app selects it.
//
// The upstream factory that Register installs decodes the --cloud-config
// with DecodeConfig[C] (strict YAML or JSON, the zero C when there is no
// file, then C's Validate), calls factory, and returns an error — never
// panics — when any step fails or factory returns a nil provider.
//
// Register returns an error wrapping ErrAlreadyRegistered, instead of the
// fatal exit of the upstream registry, when name is taken; an error for an
// empty name or a nil factory. It is safe for concurrent use; a name
// registered directly upstream at the same moment by other code is not
// detected.
func Register[C any](name string, factory Factory[C]) error {
	if name == "" {
		return errors.New("provider.Register: name is empty: expected the provider name used with --cloud-provider")
	}
	if factory == nil {
		return fmt.Errorf("provider.Register: factory of %q is nil: expected a provider.Factory", name)
	}
	registerMu.Lock()
	defer registerMu.Unlock()
	if cloudprovider.IsCloudProvider(name) {
		return fmt.Errorf("provider.Register: name %q: %w: expected a name not registered yet", name, ErrAlreadyRegistered)
	}
	cloudprovider.RegisterCloudProvider(name, func(r io.Reader) (cloudprovider.Interface, error) {
		return build(name, r, factory)
	})
	registered = append(registered, name)
	return nil
}

// Registered returns the names registered with Register in this process,
// sorted: what a cloud-controller-manager main can offer for
// --cloud-provider, without keeping its own list next to its imports.
// Providers registered directly with cloudprovider.RegisterCloudProvider
// are not listed (the upstream registry cannot be listed). It is safe for
// concurrent use; the result belongs to the caller.
func Registered() []string {
	registerMu.Lock()
	defer registerMu.Unlock()
	return slices.Sorted(slices.Values(registered))
}

// InitCloud builds the provider registered as name from the cloud-config
// file at path (empty: none), as a cloud-controller-manager's
// --cloud-provider and --cloud-config do (cloudprovider.InitCloudProvider),
// with errors that name the flag, the value and what was expected: a name
// that is empty, "external" or not registered in this process; a path that
// cannot be read (InitCloudProvider would exit with an unreadable message,
// k8s.io/cloud-provider plugins.go); and the provider's own error, wrapped.
func InitCloud(name, path string) (cloudprovider.Interface, error) {
	if name == "" || cloudprovider.IsExternal(name) || !cloudprovider.IsCloudProvider(name) {
		return nil, fmt.Errorf("--cloud-provider=%q: expected the name of a provider registered in this binary, one of %q", name, Registered())
	}
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("--cloud-config=%q: expected a readable cloud-config file: %w", path, err)
		}
	}
	cloud, err := cloudprovider.InitCloudProvider(name, path)
	if err != nil {
		return nil, fmt.Errorf("cloud provider %q could not be initialized from --cloud-config=%q: %w", name, path, err)
	}
	return cloud, nil
}

// Build decodes a cloud-config from r as Register's factory does and calls
// factory with it, without touching the registry. It is for tests and for
// programs that construct a provider outside the cloud-controller-manager.
// A nil r means "no cloud-config".
func Build[C any](name string, r io.Reader, factory Factory[C]) (cloudprovider.Interface, error) {
	if factory == nil {
		return nil, fmt.Errorf("provider.Build: factory of %q is nil: expected a provider.Factory", name)
	}
	return build(name, r, factory)
}

func build[C any](name string, r io.Reader, factory Factory[C]) (cloudprovider.Interface, error) {
	cfg, err := DecodeConfig[C](r)
	if err != nil {
		return nil, fmt.Errorf("cloud provider %q: %w", name, err)
	}
	cloud, err := factory(cfg)
	if err != nil {
		return nil, fmt.Errorf("cloud provider %q: %w", name, err)
	}
	if check.IsNil(cloud) {
		return nil, fmt.Errorf("cloud provider %q: factory returned a nil provider and no error: expected a provider or an error", name)
	}
	return cloud, nil
}
