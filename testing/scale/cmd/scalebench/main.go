// Command scalebench runs the scale simulator (package
// github.com/ccmkit/ccmkit/testing/scale) against ccmkit's fake, with and
// without shared backend pools, and against the upstream
// k8s.io/cloud-provider/fake at several cluster
// sizes, and writes a Markdown table of the cloud calls by scenario and
// operation against each scenario's minimum (to standard output) and an
// SVG chart of the calls against cluster size (to -svg). BENCHMARKS.md
// embeds both.
//
//	go run ./testing/scale/cmd/scalebench -sizes 10x5,100x50,1000x500 -svg testing/scale/calls.svg
//
// Each size is Nodes x Services. The upstream fake keeps no per-instance
// state, so its churn scenario is skipped. Each Driver-boundary table
// (ccmkit's fake) names the cloud costs its cloud minimums were computed
// with (scale.Target.CloudCosts, which scale.FakeTarget states from the
// fake's cloud-config): with backend pools per Service a Node change is a
// write to every load balancer, with shared pools one pool write.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/ccmkit/ccmkit/testing/scale"
)

func main() {
	sizes := flag.String("sizes", "10x5,100x50", "comma-separated cluster sizes, each <nodes>x<services>")
	svg := flag.String("svg", "", "file to write the SVG chart to (empty: no chart)")
	only := flag.String("providers", "", "comma-separated keys of the providers to run (empty: all): "+providerNames())
	flag.DurationVar(&tuning.RoutePeriod, "route-reconciliation-period", 0, "the route controller's period, as set on a cluster (0: the upstream default, 10s); compressed")
	flag.DurationVar(&tuning.NodeMonitorPeriod, "node-monitor-period", 0, "the node-lifecycle controller's period, as set on a cluster (0: the upstream default, 5s); compressed")
	flag.DurationVar(&tuning.DriftRepairPeriod, "drift-repair-period", 0, "also run ccmkit's drift-repair controller with this period, as set on a cluster (0: off); compressed")
	flag.IntVar(&tuning.Compression, "compression", 100, "scale.Config.Compression: the controllers' periods and the fake's TTLs are divided by it (the rate-limited provider runs at 1)")
	flag.DurationVar(&coalesceWindow, "coalesce-window", 0, "the coalesced providers' loadbalancer.Options.CoalesceWindow in real time, not compressed (0: loadbalancer.RecommendedCoalesceWindow divided by -compression)")
	skip := flag.String("skip", "", "comma-separated scenarios not to run (steady, churn, restart, deletion)")
	flag.Parse()
	if *skip != "" {
		tuning.Skip = strings.Split(*skip, ",")
	}
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	ps, err := selectProviders(*only)
	if err == nil && tuning.Compression < 1 {
		err = fmt.Errorf("-compression %d: expected 1 or more", tuning.Compression)
	}
	if err == nil {
		err = run(context.Background(), ps, *sizes, *svg, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}

// tuning holds the scale.Config fields the flags set for every run:
// the controller periods and the scenarios to skip.
var tuning scale.Config

// size is one cluster size.
type size struct{ nodes, services int }

func parseSizes(s string) ([]size, error) {
	var out []size
	for _, f := range strings.Split(s, ",") {
		n, m, ok := strings.Cut(strings.TrimSpace(f), "x")
		nodes, err1 := strconv.Atoi(n)
		services, err2 := strconv.Atoi(m)
		if !ok || err1 != nil || err2 != nil || nodes < 1 || services < 0 {
			return nil, fmt.Errorf("-sizes %q: expected <nodes>x<services> such as 100x50", f)
		}
		out = append(out, size{nodes, services})
	}
	return out, nil
}

// result is one simulation's report, by provider.
type result struct {
	provider string
	report   *scale.Report
	limit    *rates // the provider's rate limit; nil: none
}

func run(ctx context.Context, providers []provider, sizesFlag, svgPath string, out io.Writer) error {
	sizes, err := parseSizes(sizesFlag)
	if err != nil {
		return err
	}
	var results []result
	for _, sz := range sizes {
		for _, p := range providers {
			cfg := p.config(sz)
			t, err := p.target(time.Minute / time.Duration(cfg.Compression))
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			fmt.Fprintf(os.Stderr, "scalebench: %s, %d nodes, %d services\n", p.name, sz.nodes, sz.services)
			r, err := scale.Run(ctx, t, cfg)
			if err != nil {
				return fmt.Errorf("%s at %d nodes: %w", p.name, sz.nodes, err)
			}
			results = append(results, result{p.name, r, p.limit})
		}
	}
	writeMarkdown(out, results)
	if svgPath == "" {
		return nil
	}
	return os.WriteFile(svgPath, []byte(chart(results)), 0o644) //nolint:gosec // G306: a chart for people to read, not a secret
}

// spread is the bring-up's spread: a millisecond per Node, at least one
// second.
func spread(nodes int) time.Duration { return max(time.Second, time.Duration(nodes)*time.Millisecond) }
