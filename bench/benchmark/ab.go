package benchmark

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gauntlet-dev/gauntlet/bench/load"
	"github.com/gauntlet-dev/gauntlet/bench/report"
	"github.com/gauntlet-dev/gauntlet/bench/result"
	"github.com/gauntlet-dev/gauntlet/bench/testbed"
)

// ABRevisions name what each side of an A/B run measured.
type ABRevisions struct {
	// A and B are git revisions, B suffixed "-dirty" when it is the working
	// tree with uncommitted changes.
	A, B string
	// TargetA and TargetB name a target's version on each side (Result.Target),
	// empty for gauntlet's own operator.
	TargetA, TargetB string
}

// RunAB measures both sides of pair in one run (MeasureAB) and returns each
// side's result: its own steps plus the steps measured once for both
// (Step.Shared). The results are named run-a and run-b.
func RunAB(ctx context.Context, pair *testbed.Pair, cfg Config, name string, revs ABRevisions) (a, b result.Result, err error) {
	side := func(suffix, rev, target string) result.Result {
		settings := cfg.Settings()
		settings["segments"] = strconv.Itoa(cfg.Segments)
		settings["segmentWarmup"] = cfg.SegmentWarmup.String()
		if pair.Separate {
			settings["clusters"] = "one per side, loaded in turns"
		}
		return result.Result{
			Target:            target,
			Run:               name + "-" + suffix,
			StartedAt:         time.Now().UTC(),
			Machine:           result.DescribeMachine(),
			KubernetesVersion: pair.A.KubernetesVersion,
			Provider:          pair.A.Provider,
			Settings:          settings,
			GitRevision:       rev,
		}
	}
	a, b = side("a", revs.A, revs.TargetA), side("b", revs.B, revs.TargetB)
	start, ok := result.ReadLoadAverage()
	a.Steps, b.Steps, err = MeasureAB(ctx, pair, cfg)
	if end, ok2 := result.ReadLoadAverage(); ok && ok2 {
		a.LoadAverage = &result.LoadAverage{Start: start, End: end}
		b.LoadAverage = a.LoadAverage
	}
	return a, b, err
}

// MeasureAB runs the ladders against both sides of pair, rate by rate. At
// each rate the ladders of a mode (direct: validate and mutate; through the
// API server: the dry-run create through the webhooks, its control and the
// floors) run in turns (load.RunTurns), both sides' ladders and the ones
// measured for both in one set of rounds: A B control floor, then back, in
// cfg.Segments segments each, starting backward on every other rate. The
// machine's drift over the run falls on every ladder alike, and window i of
// every ladder ran in the same round: CompareAB pairs A's with B's, and
// FloorRatios resamples a side's with the control's and the floor's. In one
// cluster the control and floor ladders do not depend on the operator: they
// run once and go into both sides' steps, marked Shared; when each side has a
// cluster of its own (pair.Separate) they run on each side, marked
// Reference. The direct control ladder, whose only use is to relate a run to
// a stored baseline's machine, is not run. A mode's ladders stop after the
// rate at which either side saturated (Config.SaturationP50).
func MeasureAB(ctx context.Context, pair *testbed.Pair, cfg Config) (a, b []result.Step, err error) {
	progress := load.Progress{W: cfg.Progress, Start: time.Now()}
	opts := load.StepOptions{Warmup: cfg.Warmup, Duration: cfg.Duration, Windows: cfg.Windows}
	rounds := 0 // rates measured so far: their order alternates
	probe := func(tb *testbed.Testbed) load.Probe {
		return load.Probe{Source: "operator", Client: tb.OperatorMetricsClient,
			URL: tb.OperatorMetricsURL, Metric: OperatorHistogram, GroupBy: []string{"webhook"}}
	}

	if len(cfg.DirectRates) > 0 && pair.A.Object == nil {
		da, err := directWorkloads(pair.A, cfg, probe(pair.A))
		if err != nil {
			return nil, nil, err
		}
		db, err := directWorkloads(pair.B, cfg, probe(pair.B))
		if err != nil {
			return nil, nil, err
		}
		// The first two are the validate and mutate ladders; the third, the direct control, is
		// not run (see above).
		sa, sb, err := climbAB(ctx, cfg, cfg.DirectRates, da[:2], db[:2], 2, nil, opts, progress, &rounds)
		a, b = append(a, sa...), append(b, sb...)
		if err != nil {
			return a, b, err
		}
	}

	if len(cfg.APIServerRates) > 0 {
		wa, err := apiServerWorkloads(pair.A, probe(pair.A))
		if err != nil {
			return a, b, err
		}
		wb, err := apiServerWorkloads(pair.B, probe(pair.B))
		if err != nil {
			return a, b, err
		}
		// [0] is the webhook ladder of each side; in one cluster the control and the floors
		// (when the testbed has them) are side A's, the same requests either way; in clusters
		// of their own, each side's.
		sideA, sideB, shared, judged := wa[:1], wb[:1], wa[1:], 1
		if pair.Separate {
			sideA, sideB, shared = wa, wb, nil
		}
		sa, sb, err := climbAB(ctx, cfg, cfg.APIServerRates, sideA, sideB, judged, shared, opts, progress, &rounds)
		a, b = append(a, sa...), append(b, sb...)
		if err != nil {
			return a, b, err
		}
	}
	return a, b, nil
}

// climbAB runs, at each rate in turn, every pair of side workloads and every
// shared one in one set of turns (the order alternating with *rounds, the
// count of rates measured so far), and stops after the rate at which a side
// saturated. The pairs after the first judged ones are each side's references
// (Step.Reference): they neither get judged nor end the ladder; the shared
// workloads' steps go to both sides (Step.Shared).
func climbAB(ctx context.Context, cfg Config, rates []float64, sideA, sideB []load.Workload, judged int, shared []load.Workload, opts load.StepOptions,
	progress load.Progress, rounds *int) (a, b []result.Step, err error) {
	if len(sideA) != len(sideB) {
		return nil, nil, fmt.Errorf("A/B ladders: side A has %d, side B %d", len(sideA), len(sideB))
	}
	var turns []load.Turn
	for i := range sideA {
		if sideA[i].Spec.Name != sideB[i].Spec.Name {
			return nil, nil, fmt.Errorf("A/B ladder %d: side A measures %s, side B %s; both must measure the same ladder", i+1, sideA[i].Spec.Name, sideB[i].Spec.Name)
		}
		turns = append(turns, load.Turn{Side: "A", Workload: sideA[i]}, load.Turn{Side: "B", Workload: sideB[i]})
	}
	for _, w := range shared {
		turns = append(turns, load.Turn{Workload: w})
	}
	for _, rate := range rates {
		plan := load.TurnPlan{Segments: cfg.Segments, SegmentWarmup: cfg.SegmentWarmup, Order: *rounds}
		steps, err := load.RunTurns(ctx, turns, rate, opts, plan, progress)
		if err != nil {
			return a, b, err
		}
		*rounds++
		saturated := false
		for i := range sideA {
			sa, sb := steps[2*i], steps[2*i+1]
			if i >= judged {
				sa.Reference, sb.Reference = true, true
			} else {
				saturated = cfg.saturated(sa, progress) || cfg.saturated(sb, progress) || saturated
			}
			a, b = append(a, sa), append(b, sb)
		}
		for _, s := range steps[2*len(sideA):] {
			s.Shared = true
			a, b = append(a, s), append(b, s)
		}
		if saturated && rate == rates[0] {
			return a, b, tooBusy(rate, sideA[0].Spec.Name)
		}
		if saturated {
			break
		}
	}
	return a, b, nil
}

// tooBusy is the error of an A/B run whose lowest rate already saturated:
// nothing could be judged.
func tooBusy(rate float64, ladder string) error {
	loadAverage := ""
	if l, ok := result.ReadLoadAverage(); ok {
		loadAverage = fmt.Sprintf(" (load average %.1f)", l)
	}
	return fmt.Errorf("the machine is too busy to measure: %s saturated at its lowest rate, %g req/s, so no step could be judged; "+
		"stop other work on the machine%s or start lower (--direct-rates, --apiserver-rates)", ladder, rate, loadAverage)
}

// EstimateAB is how long the attacks of an A/B run of c take (setup
// excluded) when the API server's ladders count floors floor ladders: per
// direct rate the validate and mutate ladders of both sides in turns; per
// API-server rate the webhook ladder of both sides with the control and the
// floors (separate: each side's), every workload's segments with their
// warm-ups.
func (c Config) EstimateAB(separate bool, floors int) time.Duration {
	workload := c.Duration + c.Warmup + time.Duration(max(0, c.Segments-1))*c.SegmentWarmup
	references := 1 + floors    // the control and the floors
	apiServer := 2 + references // both sides' webhook ladders, the references once
	if separate {
		apiServer = 2 * (1 + references) // each side's webhook ladder and references
	}
	return time.Duration(len(c.DirectRates))*4*workload + time.Duration(len(c.APIServerRates))*time.Duration(apiServer)*workload
}

// WriteAB writes an A/B run into dir: each side's result.json, report.md and
// plots in dir/a and dir/b, and dir/report.md with the comparison and each
// side's overhead against the floor. It returns the paths written.
func WriteAB(dir string, a, b result.Result, cfg Config, c result.Comparison) ([]string, error) {
	var paths []string
	for _, side := range []struct {
		name string
		res  result.Result
	}{{"a", a}, {"b", b}} {
		files, err := Write(filepath.Join(dir, side.name), side.res, cfg, nil)
		if err != nil {
			return nil, err
		}
		paths = append(paths, files...)
	}
	var buf bytes.Buffer
	sideReports := [2]string{"a/" + report.ReportFile, "b/" + report.ReportFile}
	if err := report.ABMarkdown(&buf, c, a, b, cfg.Floors(a), sideReports); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, report.ReportFile)
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	return append(paths, path), nil
}
