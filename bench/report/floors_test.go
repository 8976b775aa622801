package report

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/bench/result"
)

// inTurns is a step of ladder name at rate through the API server, measured in turns: 12
// windows whose p50 is base[i] + overhead (± 0.1 ms) and whose p99 twice that.
func inTurns(rng *rand.Rand, name, control string, rate float64, base []float64, overhead float64) result.Step {
	s := result.Step{StepSpec: result.StepSpec{Name: name, Mode: result.APIServer, Rate: rate, Control: control}, Requests: 1000, SuccessRatio: 1, Segments: 4}
	for i, b := range base {
		p50 := b + overhead + 0.1*(2*rng.Float64()-1)
		s.Windows = append(s.Windows, result.Window{StartSeconds: float64(i), Requests: 80, P50Ms: p50, P99Ms: 2 * p50})
	}
	s.P50Ms, s.P99Ms = base[0]+overhead, 2*(base[0]+overhead)
	return s
}

// floorsResult is an A/B side whose operator adds operator ms over the control at 50 req/s
// and 1.2 × operator at 100, against a floor of 2 ms, a patching floor of 2.5 ms and the floor
// at its pod's address, 1.5 ms.
func floorsResult(seed uint64, operator float64) result.Result {
	rng := rand.New(rand.NewPCG(seed, seed)) //nolint:gosec // G404: a fixed seed for reproducible synthetic data
	r := result.Result{Run: "ab-a", Machine: result.Machine{CPUModel: "AMD EPYC", Cores: 2}}
	for _, rate := range []float64{50, 100} {
		base := make([]float64, 12)
		for i := range base {
			base[i] = 5 + float64(i)/4 // a drift of the machine over the step
		}
		over := operator
		if rate == 100 {
			over *= 1.2
		}
		r.Steps = append(r.Steps,
			inTurns(rng, "apiserver/dgd", "apiserver/dgd-control", rate, base, over),
			inTurns(rng, "apiserver/dgd-control", "", rate, base, 0),
			inTurns(rng, "apiserver/floor", "apiserver/dgd-control", rate, base, 2),
			inTurns(rng, "apiserver/floor-patching", "apiserver/dgd-control", rate, base, 2.5),
			inTurns(rng, "apiserver/floor-direct", "apiserver/dgd-control", rate, base, 1.5),
		)
	}
	return r
}

var testFloors = Floors{Ladder: "apiserver/dgd", Floor: "apiserver/floor", Patching: "apiserver/floor-patching", Direct: "apiserver/floor-direct", Goal: 1.3}

func TestTheFloorGoalJudgesEachRatioOnItsInterval(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, Markdown(&b, floorsResult(1, 2.5), Options{Floors: testFloors}))
	md := b.String()
	assert.Contains(t, md, "## Overhead against the floor: the goal")
	assert.Contains(t, md, "**Goal: ≤ 1.3×** at p50 and p99")
	assert.Contains(t, md, "| Rate (req/s) | operator ÷ floor, p50 | operator ÷ floor, p99 | operator ÷ patching floor, p50 | operator ÷ patching floor, p99 |")
	// 50 req/s: 2.5 ms over a floor of 2 (1.25×, give or take the noise: the interval holds the
	// goal) and over a patching floor of 2.5 (1.0×: met); 100 req/s: 3 ms, 1.5× the floor
	// (missed).
	assert.Regexp(t, `\| 50 \| ❔ 1\.2\d× \[1\.\d\d, 1\.\d\d\] \| ❔ 1\.2\d× \[1\.\d\d, 1\.\d\d\] \| ✅ 1\.0\d× \[\d\.\d\d, 1\.\d\d\] \| ✅ 1\.0\d× \[`, md)
	assert.Regexp(t, `\| 100 \| ❌ 1\.4\d× \[1\.\d\d, 1\.\d\d\] \|`, md)
	for _, h := range []string{"## Operator overhead against the floor", "## Operator overhead against the patching floor",
		"## The API server's cost of a patch: the patching floor against the floor",
		"## The Service hop: the floor through its Service against the floor at its pod's address"} {
		assert.Contains(t, md, h)
	}
	assert.Contains(t, md, "A ratio r means the Service hop (the node's proxy) is 1 − 1/r of the floor's overhead.")
	assert.Contains(t, md, "| Rate (req/s) | floor via Service +p50 | floor at its address +p50 | p50 ratio |")
	assert.Contains(t, md, "| Rate (req/s) | operator +p50 | patching floor +p50 | p50 ratio |")
	assert.Regexp(t, `\| 50 \| \+[12]\.\d\d \| \+1\.\d\d \| 1\.[2-4]\d× \[`, md, "the floor via its Service, 2 ms, against 1.5 at its address")
	assert.Regexp(t, `\| 50 \| \+2\.[45]\d \| \+[12]\.\d\d \| 1\.2\d× \[`, md, "the overheads are the windows' medians over the control beside them")
}

func TestTheFloorGoalWithoutTurnsJudgesTheRatioAlone(t *testing.T) {
	r := floorsResult(1, 2.5)
	for i := range r.Steps {
		r.Steps[i].Segments = 0
	}
	var b bytes.Buffer
	require.NoError(t, Markdown(&b, r, Options{Floors: testFloors}))
	md := b.String()
	assert.Contains(t, md, "The ladders ran one after the other, so there is no interval")
	assert.Regexp(t, `\| 50 \| ✅ 1\.25× \| ✅ 1\.25× \| ✅ 1\.00× \| ✅ 1\.00× \|`, md, "the steps' percentiles: 2.5 over 2 and 2.5")
}

func TestTheABReportSaysWhetherTheSidesRatiosAgree(t *testing.T) {
	a := floorsResult(1, 2.5)
	same, slower := floorsResult(2, 2.5), floorsResult(3, 4)
	for _, c := range []struct {
		b    result.Result
		mark string
	}{{same, "✅"}, {slower, "❌"}} {
		// The control and floors are shared: side B's are side A's.
		for i, s := range c.b.Steps {
			if s.Name != "apiserver/dgd" {
				a.Steps[i].Shared = true
				c.b.Steps[i] = a.Steps[i]
			}
		}
		var b bytes.Buffer
		require.NoError(t, ABMarkdown(&b, result.CompareAB(a, c.b, result.DefaultABTolerances(), 0), a, c.b, testFloors, [2]string{"a/report.md", "b/report.md"}))
		md := b.String()
		assert.Contains(t, md, "## Side A against the goal")
		assert.Contains(t, md, "## Side B against the goal")
		assert.Contains(t, md, "## Side B's ratio to the floor against side A's")
		assert.Regexp(t, `\| 50 \| `+c.mark+` \d\.\d\d× \[\d\.\d\d, \d\.\d\d\] \|`, md)
		assert.Contains(t, md, "## Side A: operator overhead against the floor")
		assert.Contains(t, md, "## Side B: operator overhead against the patching floor")
		assert.Contains(t, md, "## Side A: the Service hop", "tables of the floors alone, measured once for both sides, once")
		assert.NotContains(t, md, "## Side B: the Service hop")
		assert.NotContains(t, md, "## Side B: the API server's cost of a patch")
	}
}
