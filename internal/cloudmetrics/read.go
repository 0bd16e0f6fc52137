package cloudmetrics

import (
	"fmt"
	"strings"

	"k8s.io/component-base/metrics/legacyregistry"
)

// Counts is what the registry holds of this package's metrics, as the CCM
// would serve them on /metrics: for the tests of the blocks that record
// them, which compare them with their drivers' own call counts.
type Counts struct {
	// Requests is ccmkit_cloud_requests_total by
	// "capability/operation/result".
	Requests map[string]float64
	// Timed is the sample count of ccmkit_cloud_request_duration_seconds
	// by "capability/operation".
	Timed map[string]uint64
	// Cache is ccmkit_cache_lookups_total by "cache/result".
	Cache map[string]float64
	// Inconsistent is ccmkit_cloud_inconsistent_answers_total by
	// "capability/operation".
	Inconsistent map[string]float64
}

// Read gathers the registry (legacyregistry) into Counts. Its error is
// the gatherer's.
func Read() (Counts, error) {
	c := Counts{Requests: map[string]float64{}, Timed: map[string]uint64{}, Cache: map[string]float64{}, Inconsistent: map[string]float64{}}
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return c, fmt.Errorf("cloudmetrics: gathering legacyregistry: %w", err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			switch f.GetName() {
			case "ccmkit_cloud_requests_total":
				c.Requests[l["capability"]+"/"+l["operation"]+"/"+l["result"]] += m.GetCounter().GetValue()
			case "ccmkit_cloud_request_duration_seconds":
				c.Timed[l["capability"]+"/"+l["operation"]] += m.GetHistogram().GetSampleCount()
			case "ccmkit_cache_lookups_total":
				c.Cache[l["cache"]+"/"+l["result"]] += m.GetCounter().GetValue()
			case "ccmkit_cloud_inconsistent_answers_total":
				c.Inconsistent[l["capability"]+"/"+l["operation"]] += m.GetCounter().GetValue()
			}
		}
	}
	return c, nil
}

// Of returns capability's requests keyed "<operation> <result>".
func (c Counts) Of(capability string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range c.Requests {
		if rest, ok := strings.CutPrefix(k, capability+"/"); ok {
			op, result, _ := strings.Cut(rest, "/")
			out[op+" "+result] += v
		}
	}
	return out
}

// InconsistentOf returns capability's inconsistent answers keyed by
// operation.
func (c Counts) InconsistentOf(capability string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range c.Inconsistent {
		if op, ok := strings.CutPrefix(k, capability+"/"); ok {
			out[op] += v
		}
	}
	return out
}

// Since returns the counts of now that differ from before, by how much.
func Since(now, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range now {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
