package routes_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/routes"
)

// routeAPI is a per-route cloud: routes are created and deleted one at a
// time by name. The Table calls it concurrently, so it locks.
type routeAPI struct {
	mu     sync.Mutex
	byName map[string]routes.Entry
}

func (c *routeAPI) ListRoutes(ctx context.Context, clusterName string) ([]routes.Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []routes.Entry
	for _, e := range c.byName {
		if e.Cluster == clusterName { // filtering server-side is optional
			out = append(out, e)
		}
	}
	return out, nil
}

func (c *routeAPI) CreateRoute(ctx context.Context, e routes.Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byName[e.Name]; ok {
		return fmt.Errorf("route %q: %w", e.Name, routes.ErrAlreadyExists)
	}
	c.byName[e.Name] = e
	return nil
}

func (c *routeAPI) DeleteRoute(ctx context.Context, e routes.Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byName[e.Name]; !ok {
		return fmt.Errorf("route %q: %w", e.Name, routes.ErrNotFound)
	}
	delete(c.byName, e.Name)
	return nil
}

// A Table over a per-route cloud that has no IPv6: the IPv6 route is refused
// before any cloud call, creating twice is harmless, and the listed CIDR is
// the caller's spelling.
func ExampleNewTable() {
	cloud := &routeAPI{byName: map[string]routes.Entry{}}
	table, err := routes.NewTable(cloud, routes.Options{IPv4Only: true, Naming: routes.NamerOptions{Prefix: "k8s-"}})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	const uid = "0d4c5f1e-8f4a-4c49-9a39-2f1b5f8e6a01"

	err = table.CreateRoute(ctx, "kubernetes", uid, &cloudprovider.Route{TargetNode: "node-a", DestinationCIDR: "fd00:10:244:1::/64"})
	fmt.Println("IPv6 unsupported:", errors.Is(err, routes.ErrIPv6Unsupported))

	for range 2 {
		err = table.CreateRoute(ctx, "kubernetes", uid, &cloudprovider.Route{TargetNode: "node-a", DestinationCIDR: "10.244.1.0/24"})
		fmt.Println("create:", err)
	}
	listed, _ := table.ListRoutes(ctx, "kubernetes")
	r := listed[0]
	key, _ := table.Namer().Parse(r.Name)
	fmt.Println(len(listed), r.TargetNode, r.DestinationCIDR, key.NameHint == uid)

	fmt.Println("delete:", table.DeleteRoute(ctx, "kubernetes", r), table.DeleteRoute(ctx, "kubernetes", r))
	// Output:
	// IPv6 unsupported: true
	// create: <nil>
	// create: <nil>
	// 1 node-a 10.244.1.0/24 true
	// delete: <nil> <nil>
}
