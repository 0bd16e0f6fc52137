package governor_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ccmkit/ccmkit/governor"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/routes"
)

// myLoadBalancers, myInstances and myRouteTable stand for a provider's
// Drivers over its cloud's API.
type myLoadBalancers struct{}

func (myLoadBalancers) Find(context.Context, loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	return nil, nil
}

func (myLoadBalancers) Apply(_ context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	return &loadbalancer.LoadBalancer{ID: "lb-1"}, nil
}

func (myLoadBalancers) Delete(context.Context, *loadbalancer.LoadBalancer) error { return nil }

type myInstances struct{}

func (myInstances) GetByID(_ context.Context, id provider.ProviderID) (instances.Instance, error) {
	return instances.Instance{ID: id.ID, Name: "node-1"}, nil
}

func (myInstances) GetByName(_ context.Context, name string) (instances.Instance, error) {
	return instances.Instance{ID: "i-1", Name: name}, nil
}

type myRouteTable struct{}

func (myRouteTable) ReadTable(context.Context) ([]routes.Entry, string, error) { return nil, "", nil }

func (myRouteTable) WriteTable(context.Context, string, []routes.Entry) error {
	return fmt.Errorf("cloud: 429: %w", api.NewRetryError("route API rate limit", 2*time.Second))
}

// One Governor shared by the three Drivers: a node sync's backend updates
// get only what the budget leaves above their reserve, a new Service's
// load balancer still goes at once, a route write waits for a token above
// the urgent reserve, the instance reads have a bucket of their own, and
// the cloud's Retry-After pauses every write. Refusals come back at once,
// as a RetryError the controllers retry.
func Example() {
	ctx := context.Background()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	g, err := governor.New(governor.Options{
		// 4 writes at once, 1 a second; normal calls leave 1 token, background calls 2.
		Writes: governor.Limit{Rate: 1, Burst: 4, NormalReserve: 1, BackgroundReserve: 2},
		Clock:  clk, // a clock that moves only when told, for the example
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	lbs := g.LoadBalancer(myLoadBalancers{}) // to loadbalancer.NewReconciler
	nodes := g.Instances(myInstances{})      // to instances.NewAdapter
	table := g.RouteTable(myRouteTable{})    // to routes.NewWholeTable

	show := func(what string, err error) {
		var re *api.RetryError
		switch {
		case err == nil:
			fmt.Printf("%-22s ok\n", what)
		case errors.Is(err, governor.ErrOverBudget) && errors.As(err, &re):
			fmt.Printf("%-22s refused, retry after %v\n", what, re.RetryAfter())
		default:
			fmt.Printf("%-22s %v\n", what, err)
		}
	}
	for range 3 {
		_, err := lbs.Apply(ctx, loadbalancer.Action{Kind: loadbalancer.ActionAddBackends, LoadBalancerID: "lb-1"})
		show("node sync AddBackends", err)
	}
	_, err = lbs.Apply(ctx, loadbalancer.Action{Kind: loadbalancer.ActionCreate})
	show("new Service's create", err)
	show("route table write", table.WriteTable(ctx, "", nil))
	_, err = nodes.GetByID(ctx, provider.ProviderID{ID: "i-1"})
	show("instance read", err)

	clk.SetTime(clk.Now().Add(time.Second)) // a token later
	show("route table write", table.WriteTable(ctx, "", nil))
	show("load balancer delete", lbs.Delete(ctx, &loadbalancer.LoadBalancer{ID: "lb-1"}))
	// Output:
	// node sync AddBackends  ok
	// node sync AddBackends  ok
	// node sync AddBackends  refused, retry after 1s
	// new Service's create   ok
	// route table write      refused, retry after 1s
	// instance read          ok
	// route table write      cloud: 429: route API rate limit
	// load balancer delete   refused, retry after 2s
}
