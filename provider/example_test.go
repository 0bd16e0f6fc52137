package provider_test

import (
	"errors"
	"fmt"
	"strings"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/provider"
)

// Config is the cloud-config of an example provider.
type Config struct {
	ClusterID string          `json:"clusterID"`
	Endpoint  string          `json:"endpoint"`
	Token     provider.Secret `json:"token"`
}

// Validate requires a cluster ID.
func (c *Config) Validate() error {
	if c.ClusterID == "" {
		return errors.New("clusterID is empty: expected the ID that tags this cluster's cloud resources")
	}
	return nil
}

func ExampleNew() {
	var lb cloudprovider.LoadBalancer // nil: this provider has no load balancers yet
	cloud, err := provider.New("acme", provider.Options{ClusterID: "prod-1", LoadBalancer: lb})
	if err != nil {
		fmt.Println(err)
		return
	}

	_, hasLB := cloud.LoadBalancer()
	fmt.Println(cloud.ProviderName(), cloud.HasClusterID(), hasLB)
	// Output: acme true false
}

func ExampleRegister() {
	err := provider.Register("acme-example", func(cfg *Config) (cloudprovider.Interface, error) {
		return provider.New("acme-example", provider.Options{ClusterID: cfg.ClusterID})
	})
	fmt.Println("registered:", err == nil)

	// The cloud-controller-manager calls cloudprovider.InitCloudProvider
	// with --cloud-provider and --cloud-config; GetCloudProvider is the same
	// lookup with a reader.
	cloud, err := cloudprovider.GetCloudProvider("acme-example", strings.NewReader("clusterID: prod-1\nendpoint: https://api.acme\n"))
	fmt.Println(cloud.ProviderName(), cloud.HasClusterID(), err)

	_, err = cloudprovider.GetCloudProvider("acme-example", strings.NewReader("clusterID: prod-1\nendpiont: typo\n"))
	fmt.Println(err)

	err = provider.Register("acme-example", func(cfg *Config) (cloudprovider.Interface, error) { return nil, nil })
	fmt.Println(errors.Is(err, provider.ErrAlreadyRegistered))
	// Output:
	// registered: true
	// acme-example true <nil>
	// cloud provider "acme-example": invalid cloud-config: unknown field "endpiont": not a field of the configuration (names are matched exactly)
	// true
}

func ExampleDecodeConfig() {
	cfg, err := provider.DecodeConfig[Config](strings.NewReader(`{"clusterID": "prod-1", "token": "s3cr3t"}`))
	fmt.Printf("%+v %v\n", *cfg, err)

	_, err = provider.DecodeConfig[Config](nil) // no --cloud-config
	fmt.Println(err)
	// Output:
	// {ClusterID:prod-1 Endpoint: Token:[redacted]} <nil>
	// invalid cloud-config: clusterID is empty: expected the ID that tags this cluster's cloud resources
}

func ExampleCodec() {
	codec := provider.Codec{Scheme: "acme"}
	id, _ := codec.Format("i-0abc", "eu-1")
	fmt.Println(id)

	p, _ := codec.Parse(id)
	fmt.Println(p.Path, p.ID)

	_, err := codec.Parse("gce://project/zone/vm-1")
	fmt.Println(errors.Is(err, provider.ErrForeignProviderID))
	// Output:
	// acme://eu-1/i-0abc
	// [eu-1] i-0abc
	// true
}
