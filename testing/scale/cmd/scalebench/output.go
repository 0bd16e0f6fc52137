package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ccmkit/ccmkit/testing/scale"
)

var scenarios = []string{scale.BringUp, scale.Steady, scale.Churn, scale.Restart, scale.Deletion}

// writeMarkdown writes one table per cluster size, the providers side by
// side, then a Driver-boundary table for each provider that reports one
// (ccmkit's fake, with and without shared backend pools).
func writeMarkdown(w io.Writer, results []result) {
	for _, sz := range sizesOf(results) {
		at := resultsAt(results, sz)
		fmt.Fprintf(w, "\n#### %d nodes, %d LoadBalancer Services: calls at the cloudprovider.Interface boundary\n\n", sz.nodes, sz.services)
		fmt.Fprintf(w, "| scenario | operation | minimum |")
		for _, r := range at {
			fmt.Fprintf(w, " %s |", r.provider)
		}
		fmt.Fprintf(w, "\n|---|---|---|%s\n", strings.Repeat("---|", len(at)))
		for _, name := range scenarios {
			writeScenarioRows(w, name, at)
		}
	}
	for _, p := range providersOf(results) {
		writeDriverTable(w, slices.DeleteFunc(slices.Clone(results), func(r result) bool { return r.provider != p }))
	}
}

func writeScenarioRows(w io.Writer, name string, at []result) {
	reps := make([]scale.ScenarioReport, len(at))
	for i, r := range at {
		reps[i], _ = r.report.Scenario(name)
	}
	for _, op := range operationsOf(reps) {
		fmt.Fprintf(w, "| %s | %s | %s |", name, op, minimumOf(reps, op))
		for _, s := range reps {
			fmt.Fprintf(w, " %s |", cell(s, op))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "| %s | *reads, writes, throttled* | |", name)
	for _, s := range reps {
		fmt.Fprintf(w, " %s |", totalsCell(s, s.Calls))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| %s | *time to converge* | |", name)
	for _, s := range reps {
		if s.Skipped != "" {
			fmt.Fprintf(w, " skipped: %s |", s.Skipped)
			continue
		}
		fmt.Fprintf(w, " %v |", s.Converged.Round(10*time.Millisecond))
	}
	fmt.Fprintln(w)
}

// operationsOf lists the operations called or with a minimum in any of
// reps, in order.
func operationsOf(reps []scale.ScenarioReport) []string {
	var ops []string
	for _, s := range reps {
		for _, c := range s.Calls {
			ops = append(ops, c.Operation)
		}
		for _, m := range s.Minimum {
			ops = append(ops, m.Operation)
		}
	}
	slices.Sort(ops)
	return slices.Compact(ops)
}

func minimumOf(reps []scale.ScenarioReport, op string) string {
	for _, s := range reps {
		for _, m := range s.Minimum {
			if m.Operation == op {
				return fmt.Sprintf("%d (%s)", m.Calls, m.Why)
			}
		}
	}
	return "0"
}

func cell(s scale.ScenarioReport, op string) string {
	if s.Skipped != "" {
		return "—"
	}
	for _, c := range s.Calls {
		if c.Operation != op {
			continue
		}
		out := fmt.Sprint(c.Calls)
		if c.Throttled > 0 {
			out += fmt.Sprintf(", %d throttled", c.Throttled)
		}
		if c.NotFound > 0 {
			out += fmt.Sprintf(", %d not found", c.NotFound)
		}
		if c.Errors > 0 {
			out += fmt.Sprintf(", %d failed", c.Errors)
		}
		return out
	}
	return "0"
}

// writeDriverTable writes the Driver-boundary calls of results, those of
// one provider, by scenario and operation, one column per size, after the
// cloud costs its cloud minimums were computed with; nothing when the
// provider reports none.
func writeDriverTable(w io.Writer, results []result) {
	var with []result
	for _, r := range results {
		if s, ok := r.report.Scenario(scale.BringUp); ok && s.Driver != nil {
			with = append(with, r)
		}
	}
	if len(with) == 0 {
		return
	}
	fmt.Fprintf(w, "\n#### %s: calls at the Driver boundary (fake.Cloud.Calls by fake.Op)\n\n", with[0].provider)
	fmt.Fprintf(w, "Cloud minimum from the costs (scale.Target.CloudCosts): %s.\n\n| scenario | operation |", with[0].report.CloudCosts)
	for _, r := range with {
		fmt.Fprintf(w, " %d nodes |", r.report.Nodes)
	}
	fmt.Fprintf(w, "\n|---|---|%s\n", strings.Repeat("---|", len(with)))
	for _, name := range scenarios {
		full := make([]scale.ScenarioReport, len(with))
		reps := make([]scale.ScenarioReport, len(with)) // the Driver counts as Calls, for operationsOf and cell
		for i, r := range with {
			full[i], _ = r.report.Scenario(name)
			reps[i] = scale.ScenarioReport{Calls: full[i].Driver, Skipped: full[i].Skipped}
		}
		for _, op := range operationsOf(reps) {
			row(w, name, op, reps, func(s scale.ScenarioReport) string { return cell(s, op) })
		}
		row(w, name, "*reads, writes, throttled*", reps, func(s scale.ScenarioReport) string { return totalsCell(s, s.Calls) })
		row(w, name, "*reads by capability*", full, readsCell)
		row(w, name, "*cloud minimum: reads, writes*", full, func(s scale.ScenarioReport) string {
			return fmt.Sprintf("%d, %d", s.CloudMinimum.Reads, s.CloudMinimum.Writes)
		})
		row(w, name, "*calls ÷ cloud minimum*", full, ratioCell)
		row(w, name, "*coalesced minimum: reads, writes*", full, func(s scale.ScenarioReport) string {
			return fmt.Sprintf("%d, %d", s.CoalescedMinimum.Reads, s.CoalescedMinimum.Writes)
		})
		row(w, name, "*calls ÷ coalesced minimum*", full, func(s scale.ScenarioReport) string { return ratio(s, s.CoalescedMinimum) })
		if lim := with[0].limit; lim != nil {
			row(w, name, "*converged (bound: 2 × minimum ÷ rate)*", full, func(s scale.ScenarioReport) string { return boundCell(s, lim) })
		}
	}
}

// row writes one row of a Driver table: cell of each report.
func row(w io.Writer, scenario, label string, reps []scale.ScenarioReport, cell func(scale.ScenarioReport) string) {
	fmt.Fprintf(w, "| %s | %s |", scenario, label)
	for _, s := range reps {
		if s.Skipped != "" {
			fmt.Fprint(w, " — |")
			continue
		}
		fmt.Fprintf(w, " %s |", cell(s))
	}
	fmt.Fprintln(w)
}

// readsCell lists the Driver-boundary reads of s by capability.
func readsCell(s scale.ScenarioReport) string {
	by := scale.ByCapability(s.Driver)
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(by)) {
		if by[c].Reads > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, by[c].Reads))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

// ratioCell is the Driver-boundary calls of s over its cloud minimum.
func ratioCell(s scale.ScenarioReport) string { return ratio(s, s.CloudMinimum) }

// ratio is the Driver-boundary calls of s over min.
func ratio(s scale.ScenarioReport, min scale.CloudMinimum) string {
	t := scale.Sum(s.Driver)
	if min.Total() == 0 {
		return fmt.Sprintf("%d calls, minimum 0", t.Reads+t.Writes)
	}
	return fmt.Sprintf("%.2f", float64(t.Reads+t.Writes)/float64(min.Total()))
}

// boundCell is the time s took to converge and its bound under lim: twice
// the time the cloud minimum takes at the limit's rates, reads and writes
// each from their own budget.
func boundCell(s scale.ScenarioReport, lim *rates) string {
	return fmt.Sprintf("%v (%v)", s.Converged.Round(10*time.Millisecond), convergeBound(s.CloudMinimum, lim).Round(10*time.Millisecond))
}

// convergeBound is 2 × (minimum calls ÷ rate), the slower of the two
// budgets.
func convergeBound(m scale.CloudMinimum, lim *rates) time.Duration {
	secs := max(float64(m.Reads)/lim.reads, float64(m.Writes)/lim.writes)
	return time.Duration(2 * secs * float64(time.Second))
}

// totalsCell sums counts, the calls of s at one boundary.
func totalsCell(s scale.ScenarioReport, counts []scale.OpCount) string {
	if s.Skipped != "" {
		return "—"
	}
	t := scale.Sum(counts)
	return fmt.Sprintf("%d, %d, %d", t.Reads, t.Writes, t.Throttled)
}

func sizesOf(results []result) []size {
	var out []size
	for _, r := range results {
		sz := size{r.report.Nodes, r.report.Services}
		if !slices.Contains(out, sz) {
			out = append(out, sz)
		}
	}
	return out
}

func resultsAt(results []result, sz size) []result {
	var out []result
	for _, r := range results {
		if r.report.Nodes == sz.nodes && r.report.Services == sz.services {
			out = append(out, r)
		}
	}
	return out
}

// total is the cloud calls of s: at the Driver boundary when the
// provider reports it, else at the interface boundary (a provider that
// makes one cloud call per interface call, as the upstream fake models).
func total(s scale.ScenarioReport) int64 {
	counts := s.Driver
	if counts == nil {
		counts = s.Calls
	}
	t := scale.Sum(counts)
	return t.Reads + t.Writes
}

// chart draws the cloud calls (total) of each scenario against the
// number of Nodes, both axes logarithmic: one colour per scenario, one
// line style per provider (dashes), solid for the first.
func chart(results []result) string {
	const w, h, left, bottom, top, right = 860.0, 440.0, 70.0, 50.0, 20.0, 300.0
	sizes := sizesOf(results)
	xmin, xmax := math.Log10(float64(sizes[0].nodes)), math.Log10(float64(sizes[len(sizes)-1].nodes))
	ymax := 1.0
	for _, r := range results {
		for _, s := range r.report.Scenarios {
			ymax = max(ymax, math.Log10(float64(max(total(s), 1))))
		}
	}
	ymax = math.Ceil(ymax)
	x := func(nodes int) float64 {
		if xmax == xmin {
			return left
		}
		return left + (math.Log10(float64(nodes))-xmin)/(xmax-xmin)*(w-left-right)
	}
	y := func(calls int64) float64 { return h - bottom - math.Log10(float64(max(calls, 1)))/ymax*(h-bottom-top) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	axes(&b, sizes, ymax, x, func(p float64) float64 { return h - bottom - p/ymax*(h-bottom-top) }, w-right, h-bottom)
	series(&b, results, x, y)
	legend(&b, results, w-right+20)
	b.WriteString("</svg>\n")
	return b.String()
}

var colours = []string{"#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#ff7f0e"}

// dashes are the line styles of the providers, in order: solid, dashed,
// dotted, dash-dotted, sparse dots (a sixth provider would repeat the last).
var dashes = []string{"", ` stroke-dasharray="6 4"`, ` stroke-dasharray="2 3"`, ` stroke-dasharray="10 3 2 3"`, ` stroke-dasharray="1 6"`}

// dash is the line style of provider number pi.
func dash(pi int) string { return dashes[min(pi, len(dashes)-1)] }

func axes(b *strings.Builder, sizes []size, ymax float64, x func(int) float64, yp func(float64) float64, xend, ybase float64) {
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", x(sizes[0].nodes), ybase, xend, ybase)
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", x(sizes[0].nodes), ybase, x(sizes[0].nodes), yp(ymax))
	for _, sz := range sizes {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle">%d</text>`+"\n", x(sz.nodes), ybase+16, sz.nodes)
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle">nodes (Services = nodes / 2)</text>`+"\n", (x(sizes[0].nodes)+xend)/2, ybase+36)
	for p := 0.0; p <= ymax; p++ {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="end">%.0f</text>`+"\n", x(sizes[0].nodes)-6, yp(p)+4, math.Pow(10, p))
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#ddd"/>`+"\n", x(sizes[0].nodes), yp(p), xend, yp(p))
	}
	fmt.Fprintf(b, `<text x="14" y="%.0f" transform="rotate(-90 14 %.0f)" text-anchor="middle">cloud calls per scenario</text>`+"\n", ybase/2, ybase/2)
}

func series(b *strings.Builder, results []result, x func(int) float64, y func(int64) float64) {
	for pi, p := range providersOf(results) {
		for si, name := range scenarios {
			var pts []string
			for _, r := range results {
				s, ok := r.report.Scenario(name)
				if r.provider != p || !ok || s.Skipped != "" {
					continue
				}
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.report.Nodes), y(total(s))))
			}
			if len(pts) > 0 {
				fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), colours[si], dash(pi))
			}
		}
	}
}

func legend(b *strings.Builder, results []result, x0 float64) {
	for si, name := range scenarios {
		yy := 40 + 20*float64(si)
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="3"/><text x="%.0f" y="%.0f">%s</text>`+"\n", x0, yy, x0+24, yy, colours[si], x0+30, yy+4, name)
	}
	for pi, p := range providersOf(results) {
		yy := 160 + 20*float64(pi)
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black" stroke-width="2"%s/><text x="%.0f" y="%.0f">%s</text>`+"\n", x0, yy, x0+24, yy, dash(pi), x0+30, yy+4, p)
	}
}

func providersOf(results []result) []string {
	var out []string
	for _, r := range results {
		if !slices.Contains(out, r.provider) {
			out = append(out, r.provider)
		}
	}
	return out
}
