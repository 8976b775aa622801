package leases

import "time"

// probeRun is a stretch of consecutive probes (in the order sent) with the same validators:
// none, or both operators.
type probeRun struct {
	first, last probe
	count       int
}

// span is how long the stretch lasted for users: from its first probe's sending to its last
// probe's answer.
func (r probeRun) span() time.Duration { return r.last.done.Sub(r.first.sent) }

// validatorRuns splits probes (in the order sent) by who validated each, from the operators'
// `validate create` results vA and vB: the stretches no operator validated and those both did.
func validatorRuns(probes []probe, vA, vB map[string][]string) (neither, both []probeRun) {
	var curNeither, curBoth *probeRun
	extend := func(runs *[]probeRun, cur **probeRun, p probe) {
		if *cur == nil {
			*runs = append(*runs, probeRun{first: p})
			*cur = &(*runs)[len(*runs)-1]
		}
		(*cur).last = p
		(*cur).count++
	}
	for _, p := range probes {
		inA, inB := validatedBy(vA[p.name]), validatedBy(vB[p.name])
		if inA || inB {
			curNeither = nil
		} else {
			extend(&neither, &curNeither, p)
		}
		if inA && inB {
			extend(&both, &curBoth, p)
		} else {
			curBoth = nil
		}
	}
	return neither, both
}

// spans are the runs' spans in seconds, rounded to milliseconds.
func spans(runs []probeRun) []float64 {
	out := make([]float64, 0, len(runs))
	for _, r := range runs {
		out = append(out, round3(r.span().Seconds()))
	}
	return out
}
