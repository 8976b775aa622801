package chart

import (
	"fmt"
	"time"
)

// LeaseTimings are the namespace lock Lease settings (chart values namespaceRestriction.lease.*):
// the restricted operator writes Duration into the Lease and renews it every RenewInterval; the
// cluster-wide operator keeps skipping the namespace until renewTime + Duration + GracePeriod.
type LeaseTimings struct {
	Duration      time.Duration
	RenewInterval time.Duration
	GracePeriod   time.Duration
}

// DefaultLeaseTimings are the chart's documented defaults: 25 s, renewed every 10 s, 5 s grace.
func DefaultLeaseTimings() LeaseTimings {
	return LeaseTimings{Duration: 25 * time.Second, RenewInterval: 10 * time.Second, GracePeriod: 5 * time.Second}
}

// FailoverWindow is the documented longest time a cluster-wide operator keeps skipping a
// namespace whose restricted operator died without deleting its Lease, counted from the last
// renewal: Duration + GracePeriod.
func (l LeaseTimings) FailoverWindow() time.Duration { return l.Duration + l.GracePeriod }

func (l LeaseTimings) String() string {
	return fmt.Sprintf("lease %s, renewed every %s, grace %s", l.Duration, l.RenewInterval, l.GracePeriod)
}

// Values are the chart values that set l.
func (l LeaseTimings) Values() map[string]any {
	return map[string]any{"namespaceRestriction": map[string]any{"lease": map[string]any{
		"duration":      l.Duration.String(),
		"renewInterval": l.RenewInterval.String(),
		"gracePeriod":   l.GracePeriod.String(),
	}}}
}

// LeaseTimingsOf reads the lease timings r is installed with; unset ones are the chart's
// defaults.
func LeaseTimingsOf(r *Release) (LeaseTimings, error) {
	t := DefaultLeaseTimings()
	for _, f := range []struct {
		key string
		dst *time.Duration
	}{{"duration", &t.Duration}, {"renewInterval", &t.RenewInterval}, {"gracePeriod", &t.GracePeriod}} {
		s, ok := lookupString(r.Values, "namespaceRestriction", "lease", f.key)
		if !ok || s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return LeaseTimings{}, fmt.Errorf("%s: namespaceRestriction.lease.%s=%q: %w", r, f.key, s, err)
		}
		*f.dst = d
	}
	return t, nil
}

// WithLeaseTimings returns a copy of r installed with lease timings l (r's values are not
// changed: releases handed to a suite share their maps).
func (r Release) WithLeaseTimings(l LeaseTimings) Release {
	r.Values = MergeValues(r.Values, l.Values())
	return r
}
