package cloudmetrics

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The metrics of a rate governor (package governor), all ALPHA:
//
//	ccmkit_governor_tokens{class}
//	ccmkit_governor_admitted_total{class, priority}
//	ccmkit_governor_refused_total{class, priority}
//	ccmkit_governor_pauses_total{class}
//	ccmkit_governor_paused_seconds_total{class}
//
// class is a class of cloud calls with a token bucket of its own ("reads",
// "writes"), priority the priority of the call ("urgent", "normal",
// "background"). They are registered with legacyregistry the first time a
// governor asks for its series (GovernorSeries), apart from the cloud-call
// metrics of cloudmetrics.go. Several governors in one process add to the
// same series.
var (
	governorTokens = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "ccmkit",
		Subsystem:      "governor",
		Name:           "tokens",
		Help:           "Tokens in the rate governor's bucket of a class of cloud calls, as of its last admission, refusal or pause (an idle bucket refills without changing it).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"class"})
	governorAdmitted = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "ccmkit",
		Subsystem:      "governor",
		Name:           "admitted_total",
		Help:           "Cloud calls the rate governor let through, by class and priority.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"class", "priority"})
	governorRefused = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "ccmkit",
		Subsystem:      "governor",
		Name:           "refused_total",
		Help:           "Cloud calls the rate governor refused (returned as an api.RetryError without calling the cloud), by class and priority.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"class", "priority"})
	governorPauses = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "ccmkit",
		Subsystem:      "governor",
		Name:           "pauses_total",
		Help:           "Throttled answers (Retry-After) from the cloud that paused a class of calls in the rate governor.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"class"})
	governorPaused = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "ccmkit",
		Subsystem:      "governor",
		Name:           "paused_seconds_total",
		Help:           "Time by which the cloud's Retry-After answers paused, or extended the pause of, a class of calls in the rate governor.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"class"})

	registerGovernor sync.Once
)

// GovernorClass is the series of one class of calls of a rate governor,
// resolved once so that recording allocates nothing. Its methods are safe
// for concurrent use.
type GovernorClass struct {
	tokens            metrics.GaugeMetric
	admitted, refused []metrics.CounterMetric // by priority index
	pauses, paused    metrics.CounterMetric
}

// GovernorSeries registers the governor metrics with legacyregistry the
// first time it is called and returns the series of class, with one
// admitted and one refused counter for each of priorities, which the
// methods of GovernorClass then index by position. Safe for concurrent
// use.
func GovernorSeries(class string, priorities []string) *GovernorClass {
	registerGovernor.Do(func() {
		legacyregistry.MustRegister(governorTokens, governorAdmitted, governorRefused, governorPauses, governorPaused)
	})
	m := &GovernorClass{
		tokens: governorTokens.WithLabelValues(class),
		pauses: governorPauses.WithLabelValues(class),
		paused: governorPaused.WithLabelValues(class),
	}
	for _, p := range priorities {
		m.admitted = append(m.admitted, governorAdmitted.WithLabelValues(class, p))
		m.refused = append(m.refused, governorRefused.WithLabelValues(class, p))
	}
	return m
}

// Admitted records a call of the priority at index priority let through,
// leaving tokens in the bucket. An index out of range records only tokens.
func (m *GovernorClass) Admitted(priority int, tokens float64) {
	m.tokens.Set(tokens)
	if priority >= 0 && priority < len(m.admitted) {
		m.admitted[priority].Inc()
	}
}

// Refused records a call of the priority at index priority refused, with
// tokens in the bucket. An index out of range records only tokens.
func (m *GovernorClass) Refused(priority int, tokens float64) {
	m.tokens.Set(tokens)
	if priority >= 0 && priority < len(m.refused) {
		m.refused[priority].Inc()
	}
}

// Paused records a throttled answer from the cloud that paused the class
// or extended its pause by extended (0 when the class was already paused
// for longer), leaving tokens in the bucket.
func (m *GovernorClass) Paused(extended time.Duration, tokens float64) {
	m.tokens.Set(tokens)
	m.pauses.Inc()
	m.paused.Add(extended.Seconds())
}

// GovernorCounts is what the registry holds of the governor metrics, for
// the tests of package governor, keyed by their label values joined with
// "/": Tokens by "class", Admitted and Refused by "class/priority",
// Pauses and PausedSeconds by "class".
type GovernorCounts struct {
	Tokens, Admitted, Refused, Pauses, PausedSeconds map[string]float64
}

// ReadGovernor gathers the registry (legacyregistry) into GovernorCounts.
// Its error is the gatherer's.
func ReadGovernor() (GovernorCounts, error) {
	c := GovernorCounts{Tokens: map[string]float64{}, Admitted: map[string]float64{}, Refused: map[string]float64{}, Pauses: map[string]float64{}, PausedSeconds: map[string]float64{}}
	byName := map[string]map[string]float64{
		"ccmkit_governor_tokens":               c.Tokens,
		"ccmkit_governor_admitted_total":       c.Admitted,
		"ccmkit_governor_refused_total":        c.Refused,
		"ccmkit_governor_pauses_total":         c.Pauses,
		"ccmkit_governor_paused_seconds_total": c.PausedSeconds,
	}
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return c, fmt.Errorf("cloudmetrics: gathering legacyregistry: %w", err)
	}
	for _, f := range families {
		into, ok := byName[f.GetName()]
		if !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			key := ""
			for i, p := range m.GetLabel() { // sorted by name: class before priority
				if i > 0 {
					key += "/"
				}
				key += p.GetValue()
			}
			into[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return c, nil
}
