package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Rule describes one rule of the suite.
type Rule struct {
	// ID names the rule in subtests, failures and Config.Skip, such as
	// "LB-IDEMPOTENT".
	ID string
	// Statement is the rule in one sentence.
	Statement string
	// Source is where the contract comes from, as "file function" in
	// k8s.io/cloud-provider@v0.37.2: for an upstream contract, the code
	// that needs it; for a recommendation, the code that makes it sound.
	Source string
	// Recommendation marks a ccmkit recommendation: a policy stricter than
	// what the upstream code needs. False: an upstream contract.
	// Config.UpstreamOnly skips every recommendation.
	Recommendation bool
	// Cases names the cases of a table-driven rule, which Config.Skip
	// accepts as "RULE/case". Nil for a rule without named cases.
	Cases []string
}

// Rules returns every rule of the suite, in the order Run and Check run
// them. The slice is a copy.
func Rules() []Rule {
	out := make([]Rule, len(rules))
	for i, r := range rules {
		out[i] = Rule{ID: r.id, Statement: r.statement, Source: r.source, Recommendation: r.kind == recommendation, Cases: slices.Clone(r.cases())}
	}
	return out
}

// Failure is one broken rule, as Check reports it.
type Failure struct {
	// Rule is the ID of the broken rule.
	Rule string
	// Message says what was observed and what was expected.
	Message string
	// Recommendation is true when the rule is a ccmkit recommendation, not
	// an upstream contract (see Rule.Recommendation).
	Recommendation bool
}

// Error returns "RULE-ID: message", or "RULE-ID: [recommendation] message"
// for a recommendation.
func (f *Failure) Error() string { return f.Rule + ": " + mark(f.Recommendation) + f.Message }

// mark returns the prefix of a recommendation's failure messages.
func mark(rec bool) string {
	if rec {
		return "[recommendation] "
	}
	return ""
}

// Status is how a rule ended.
type Status string

const (
	// Passed: the rule ran and found nothing wrong.
	Passed Status = "pass"
	// Failed: the rule found at least one failure (Outcome.Messages).
	Failed Status = "fail"
	// Skipped: the rule did not run, or stopped before it checked anything
	// (Outcome.SkipReason).
	Skipped Status = "skip"
)

// Outcome is how one rule ended, as Evaluate reports it.
type Outcome struct {
	// Rule is the rule's ID; Recommendation is Rule.Recommendation.
	Rule           string
	Recommendation bool
	// Status is Passed, Failed or Skipped.
	Status Status
	// Messages are the failures, each saying what was observed and what
	// was expected, without the rule ID; empty unless Status is Failed.
	Messages []string
	// SkipReason says why the rule was skipped; empty unless Status is
	// Skipped.
	SkipReason string
	// Logs are the rule's notes (what was not checked and why, cases
	// skipped by Config.Skip), as Run logs them.
	Logs []string
}

// Run runs every rule as a subtest of t named by the rule ID, in the order of
// Rules; a rule whose capability, feature or hook is missing is skipped with
// the reason. Filter rules with go test -run 'TestX/LB-'. Run returns when
// every rule has ended, with the outcome of each rule that ran (a rule left
// out by -run has none); it does not call t.Parallel.
func Run(t *testing.T, cfg Config) []Outcome {
	t.Helper()
	c, err := cfg.normalize()
	if err != nil {
		t.Fatalf("conformance: %v", err)
	}
	var outs []Outcome
	var raced []string
	for i := range rules {
		rl := &rules[i]
		ok := t.Run(rl.id, func(t *testing.T) {
			o := outcome(rl, execute(t.Context(), c, rl))
			outs = append(outs, o)
			for _, l := range o.Logs {
				t.Log(l)
			}
			switch o.Status {
			case Skipped:
				t.Skip(o.SkipReason)
			case Failed:
				what := "an upstream contract"
				if o.Recommendation {
					what = "a ccmkit recommendation (Config.UpstreamOnly skips it)"
				}
				t.Logf("rule, %s: %s (source: %s)", what, rl.statement, rl.source)
				for _, e := range o.Messages {
					t.Error(mark(o.Recommendation) + e)
				}
			}
		})
		if o := outs[len(outs)-1]; !ok && o.Rule == rl.id && o.Status != Failed {
			// Only the race detector fails a subtest whose rule did not
			// fail: testing reports "race detected during execution of
			// test" for any race in code that ran meanwhile.
			raced = append(raced, fmt.Sprintf("%s (%s)", rl.id, o.Status))
		}
	}
	if len(outs) > 0 {
		t.Log(Summary(outs))
	}
	if len(raced) > 0 {
		t.Logf("conformance: the race detector, not the suite, failed %d subtests whose rules did not fail: %s; the race reports above name the racing code (often the provider's or its vendor's, running in the background); the rules' verdicts are the summary's", len(raced), strings.Join(raced, ", "))
	}
	return outs
}

// Summary renders outs as the suite's verdict: counts of passed, failed
// and skipped rules, then one line per failed rule. Run logs it at the end;
// it is the suite's own verdict, which go test's FAIL lines can exceed
// under -race (see "Concurrency and output" in the package
// documentation).
func Summary(outs []Outcome) string {
	var n [3]int
	var failed []string
	for _, o := range outs {
		switch o.Status {
		case Passed:
			n[0]++
		case Failed:
			n[1]++
			failed = append(failed, "\n  "+o.Rule+": "+mark(o.Recommendation)+firstLine(o.Messages[0]))
		default:
			n[2]++
		}
	}
	return fmt.Sprintf("conformance: %d rules: %d passed, %d failed, %d skipped%s", len(outs), n[0], n[1], n[2], strings.Join(failed, ""))
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// outcome is the Outcome of rule rl that gave res.
func outcome(rl *rule, res result) Outcome {
	o := Outcome{Rule: rl.id, Recommendation: rl.kind == recommendation, Status: Passed, Logs: res.logs}
	switch {
	case len(res.errs) > 0:
		o.Status, o.Messages = Failed, res.errs
	case res.skip != "":
		o.Status, o.SkipReason = Skipped, res.skip
	}
	return o
}

// Check runs every rule, in the order of Rules, and returns every failure
// joined with errors.Join: each joined error is a *Failure naming its rule.
// Skipped rules are not errors. Check returns nil when no rule fails, and an
// error that is not a *Failure when cfg is invalid. It stops early, with
// ctx's error, when ctx is done. Check may run concurrently with other
// calls of Check, Evaluate or Run on other providers: rules share nothing
// but the upstream provider registry, which they only read.
func Check(ctx context.Context, cfg Config) error {
	outs, err := Evaluate(ctx, cfg)
	var errs []error
	for _, o := range outs {
		for _, m := range o.Messages {
			errs = append(errs, &Failure{Rule: o.Rule, Message: m, Recommendation: o.Recommendation})
		}
	}
	if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Evaluate runs every rule, in the order of Rules, and returns the Outcome
// of each rule that ran or was skipped. The error is nil unless cfg is
// invalid (then no rule runs) or ctx is done (then the outcomes are those of
// the rules that ended before, and the error is ctx's). Evaluate may run
// concurrently as Check may.
func Evaluate(ctx context.Context, cfg Config) ([]Outcome, error) {
	c, err := cfg.normalize()
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	var outs []Outcome
	for i := range rules {
		if err := ctx.Err(); err != nil {
			return outs, err
		}
		rl := &rules[i]
		outs = append(outs, outcome(rl, execute(ctx, c, rl)))
	}
	return outs, nil
}

func ruleByID(id string) *rule {
	for i := range rules {
		if rules[i].id == id {
			return &rules[i]
		}
	}
	return nil
}
