package cloudmetrics

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

// TestGovernorSeries records through two series of one class (two
// governors in one process, registered once) and checks what
// legacyregistry serves and what ReadGovernor reads.
func TestGovernorSeries(t *testing.T) {
	resetSeries(governorTokens, governorAdmitted, governorRefused, governorPauses, governorPaused)
	priorities := []string{"urgent", "normal", "background"}
	m := GovernorSeries("writes", priorities)
	again := GovernorSeries("writes", priorities) // must not register twice
	m.Admitted(0, 19)
	again.Admitted(2, 18)
	m.Refused(2, 9.5)
	m.Refused(7, 9.5) // out of range: tokens only
	m.Admitted(-1, 9.5)
	m.Paused(1500*time.Millisecond, 0)
	m.Paused(0, 0) // within a longer pause
	want := `
# HELP ccmkit_governor_tokens [ALPHA] Tokens in the rate governor's bucket of a class of cloud calls, as of its last admission, refusal or pause (an idle bucket refills without changing it).
# TYPE ccmkit_governor_tokens gauge
ccmkit_governor_tokens{class="writes"} 0
# HELP ccmkit_governor_admitted_total [ALPHA] Cloud calls the rate governor let through, by class and priority.
# TYPE ccmkit_governor_admitted_total counter
ccmkit_governor_admitted_total{class="writes",priority="background"} 1
ccmkit_governor_admitted_total{class="writes",priority="normal"} 0
ccmkit_governor_admitted_total{class="writes",priority="urgent"} 1
# HELP ccmkit_governor_refused_total [ALPHA] Cloud calls the rate governor refused (returned as an api.RetryError without calling the cloud), by class and priority.
# TYPE ccmkit_governor_refused_total counter
ccmkit_governor_refused_total{class="writes",priority="background"} 1
ccmkit_governor_refused_total{class="writes",priority="normal"} 0
ccmkit_governor_refused_total{class="writes",priority="urgent"} 0
# HELP ccmkit_governor_pauses_total [ALPHA] Throttled answers (Retry-After) from the cloud that paused a class of calls in the rate governor.
# TYPE ccmkit_governor_pauses_total counter
ccmkit_governor_pauses_total{class="writes"} 2
# HELP ccmkit_governor_paused_seconds_total [ALPHA] Time by which the cloud's Retry-After answers paused, or extended the pause of, a class of calls in the rate governor.
# TYPE ccmkit_governor_paused_seconds_total counter
ccmkit_governor_paused_seconds_total{class="writes"} 1.5
`
	names := []string{"ccmkit_governor_tokens", "ccmkit_governor_admitted_total", "ccmkit_governor_refused_total", "ccmkit_governor_pauses_total", "ccmkit_governor_paused_seconds_total"}
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	got, err := ReadGovernor()
	if err != nil {
		t.Fatal(err)
	}
	wantCounts := GovernorCounts{
		Tokens:        map[string]float64{"writes": 0},
		Admitted:      map[string]float64{"writes/urgent": 1, "writes/normal": 0, "writes/background": 1},
		Refused:       map[string]float64{"writes/urgent": 0, "writes/normal": 0, "writes/background": 1},
		Pauses:        map[string]float64{"writes": 2},
		PausedSeconds: map[string]float64{"writes": 1.5},
	}
	if diff := cmp.Diff(wantCounts, got); diff != "" {
		t.Errorf("ReadGovernor (-want +got):\n%s", diff)
	}
	// Recording allocates nothing, so a governor's admitted path stays
	// free of allocations.
	if n := testing.AllocsPerRun(100, func() { m.Admitted(0, 3) }); n != 0 {
		t.Errorf("Admitted allocates %v times per call, want 0", n)
	}
}
