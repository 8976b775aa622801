package suite

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

// aProfile is a suite of 100 s: the cluster (a build inside it), the install and scenario H1,
// 20 s between them; H1 waits at three lines, the install at one.
func aProfile() profile {
	t0 := time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	wait := func(kind poll.Kind, site string, start, took int, what string) poll.Wait {
		return poll.Wait{Kind: kind, Site: "/ws/" + site, What: what, Start: at(start), Took: time.Duration(took) * time.Second}
	}
	return profile{
		suite: "hostile",
		wall:  100 * time.Second,
		root:  "/ws",
		phases: []phase{
			{title: "Bringing up local cluster e2e-hostile", start: at(0), took: 20 * time.Second},
			{title: "Building dynamo-operator", start: at(1), took: 5 * time.Second, nested: true},
			{title: "Installing charts/dynamo-operator (automatic mode)", start: at(20), took: 10 * time.Second},
			{title: "H1 malformed bodies", start: at(30), took: 50 * time.Second},
		},
		waits: []poll.Wait{
			wait(poll.Awaited, "scenarios/framework/release/wait.go:40", 21, 8, "Deployment dynamo-system/dynamo-operator to be Available"),
			wait(poll.Awaited, "scenarios/catalog/hostile/a.go:10", 31, 5, "the pod to answer"),
			wait(poll.Slept, "scenarios/catalog/hostile/b.go:20", 40, 2, "a pause"),
			wait(poll.Awaited, "scenarios/catalog/hostile/a.go:10", 50, 7, "the pod to answer again"),
			wait(poll.Watched, "scenarios/catalog/hostile/c.go:30", 60, 1, "the pod to stay Ready"),
			wait(poll.Awaited, "scenarios/catalog/hostile/a.go:10", 70, 6, "the pod to answer once more"),
		},
	}
}

// row is the table row of the rendered profile that starts with first.
func row(t *testing.T, rendered, first string) string {
	t.Helper()
	for _, line := range strings.Split(rendered, "\n") {
		if strings.HasPrefix(line, "| "+first+" |") {
			return line
		}
	}
	t.Fatalf("no row starting with %q in:\n%s", first, rendered)
	return ""
}

func TestProfileGivesEachPhaseItsShareOfTheWallTime(t *testing.T) {
	out := renderProfile(aProfile())
	assert.Contains(t, out, "Wall time 100.0s")
	assert.Contains(t, row(t, out, "Bringing up local cluster e2e-hostile"), "| 20.0s | 20.0 % |")
	assert.Contains(t, row(t, out, "↳ Building dynamo-operator"), "| 5.0s | 5.0 % |")
	assert.Contains(t, row(t, out, "H1 malformed bodies"), "| 50.0s | 50.0 % |")
	// The nested build is part of the cluster's 20 s: 100 − 20 − 10 − 50 are left.
	assert.Contains(t, row(t, out, "the rest: between the phases above (the reports, the cluster's logs, check S1, …)"), "| 20.0s | 20.0 % |")
}

// Scenarios that ran at once each show their own time; the rest counts the time they
// overlapped once.
func TestProfileCountsPhasesAtOnceOnce(t *testing.T) {
	p := aProfile()
	h1 := p.phases[3]
	p.phases = append(p.phases[:3],
		phase{title: "H1 malformed bodies", start: h1.start, took: 30 * time.Second, atOnce: true},
		phase{title: "H2 slow clients", start: h1.start.Add(10 * time.Second), took: 40 * time.Second, atOnce: true})
	out := renderProfile(p)
	assert.Contains(t, row(t, out, "∥ H1 malformed bodies"), "| 30.0s | 30.0 % |")
	assert.Contains(t, row(t, out, "∥ H2 slow clients"), "| 40.0s | 40.0 % |")
	// H1 and H2 together span 50 s, from 30 s to 80 s: 100 − 20 − 10 − 50 are left.
	assert.Contains(t, row(t, out, "the rest: between the phases above (the reports, the cluster's logs, check S1, …)"), "| 20.0s | 20.0 % |")
}

func TestProfileShowsAPhasesLongestThreeWaits(t *testing.T) {
	h1 := row(t, renderProfile(aProfile()), "H1 malformed bodies")
	assert.Regexp(t, "awaited 7.0s: the pod to answer again \\(`scenarios/catalog/hostile/a.go:10`\\)<br>"+
		"awaited 6.0s: the pod to answer once more .*<br>awaited 5.0s: the pod to answer \\(", h1)
	assert.NotContains(t, h1, "a pause", "the fourth longest wait of H1")
	assert.NotContains(t, h1, "Deployment", "a wait of the install, before H1")
}

func TestProfileGroupsWaitsBySiteMostTimeFirst(t *testing.T) {
	out := renderProfile(aProfile())
	_, table, _ := strings.Cut(out, "## Where the suite waited")
	assert.Regexp(t, "(?s)"+
		"\n\\| `scenarios/catalog/hostile/a.go:10` \\| awaited \\| 3 \\| 18.0s \\| 7.0s \\| the pod to answer again \\|\n"+
		"\\| `scenarios/framework/release/wait.go:40` \\| awaited \\| 1 \\| 8.0s \\| 8.0s \\| Deployment dynamo-system/dynamo-operator to be Available \\|\n"+
		"\\| `scenarios/catalog/hostile/b.go:20` \\| slept \\| 1 \\| 2.0s \\| 2.0s \\| a pause \\|\n"+
		"\\| `scenarios/catalog/hostile/c.go:30` \\| watched \\| 1 \\| 1.0s \\| 1.0s \\| the pod to stay Ready \\|\n$", table)
}
