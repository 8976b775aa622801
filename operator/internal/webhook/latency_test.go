package webhook

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

// countingValidator counts the calls that reach it and admits everything.
type countingValidator struct{ calls atomic.Int32 }

func (c *countingValidator) ValidateCreate(context.Context, *v1alpha1.DynamoGraphDeployment) (admission.Warnings, error) {
	c.calls.Add(1)
	return nil, nil
}

func (c *countingValidator) ValidateUpdate(context.Context, *v1alpha1.DynamoGraphDeployment, *v1alpha1.DynamoGraphDeployment) (admission.Warnings, error) {
	c.calls.Add(1)
	return nil, nil
}

func (c *countingValidator) ValidateDelete(context.Context, *v1alpha1.DynamoGraphDeployment) (admission.Warnings, error) {
	c.calls.Add(1)
	return nil, nil
}

// countingPatcher counts the calls that reach it.
type countingPatcher struct{ calls atomic.Int32 }

func (c *countingPatcher) Patch(context.Context, *v1alpha1.DynamoGraphDeployment) ([]jsonpatch.JsonPatchOperation, error) {
	c.calls.Add(1)
	return nil, nil
}

func TestLatencyInjection(t *testing.T) {
	const delay = 150 * time.Millisecond
	g := graph("team-a")

	t.Run("T9/every operation is held for the delay, then reaches next", func(t *testing.T) {
		next := &countingValidator{}
		p := &countingPatcher{}
		v := LatencyInjectedValidator[*v1alpha1.DynamoGraphDeployment](delay, next)
		pat := LatencyInjectedPatcher[*v1alpha1.DynamoGraphDeployment](delay, p)
		calls := []struct {
			name string
			call func(context.Context) error
		}{
			{"create", func(ctx context.Context) error { _, err := v.ValidateCreate(ctx, g); return err }},
			{"update", func(ctx context.Context) error { _, err := v.ValidateUpdate(ctx, g, g); return err }},
			{"delete", func(ctx context.Context) error { _, err := v.ValidateDelete(ctx, g); return err }},
			{"patch", func(ctx context.Context) error { _, err := pat.Patch(ctx, g); return err }},
		}
		for _, c := range calls {
			start := time.Now()
			require.NoError(t, c.call(context.Background()), c.name)
			assert.GreaterOrEqual(t, time.Since(start), delay, "%s returned before the injected delay", c.name)
		}
		assert.EqualValues(t, 3, next.calls.Load())
		assert.EqualValues(t, 1, p.calls.Load())
	})

	t.Run("T9/a caller that gives up ends the call with its context error; next never runs", func(t *testing.T) {
		next := &countingValidator{}
		v := LatencyInjectedValidator[*v1alpha1.DynamoGraphDeployment](time.Hour, next)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := v.ValidateCreate(ctx, g)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "injected webhook latency of 1h0m0s interrupted")
		assert.Less(t, time.Since(start), 5*time.Second)
		assert.EqualValues(t, 0, next.calls.Load())
	})

	t.Run("0 (the default) is inert: next is returned unchanged", func(t *testing.T) {
		next := &countingValidator{}
		p := &countingPatcher{}
		assert.Same(t, next, LatencyInjectedValidator[*v1alpha1.DynamoGraphDeployment](0, next).(*countingValidator))
		assert.Same(t, p, LatencyInjectedPatcher[*v1alpha1.DynamoGraphDeployment](0, p).(*countingPatcher))
		assert.Same(t, next, LatencyInjectedValidator[*v1alpha1.DynamoGraphDeployment](-time.Second, next).(*countingValidator))
	})
}

// TestRegisterComposesLatencyInjection checks the flag's path end to end: Register with
// Config.LatencyInjection delays the served validating webhook (and the denial still comes
// through), and without it the same request is answered at once.
func TestRegisterComposesLatencyInjection(t *testing.T) {
	const delay = 400 * time.Millisecond
	bad := validDGD()
	bad.Spec.Services = nil
	body := review(t, admissionv1.Create, gvkDGD, "dynamographdeployments", bad, nil)
	const path = "/validate-nvidia-com-v1alpha1-dynamographdeployment"

	for _, tc := range []struct {
		name    string
		latency time.Duration
	}{
		{"T9/with --webhook-latency-injection", delay},
		{"off by default", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := servedMuxWith(t, Config{LatencyInjection: tc.latency})
			start := time.Now()
			rec, out := post(t, h, path, body)
			elapsed := time.Since(start)
			require.Equal(t, http.StatusOK, rec.Code)
			require.NotNil(t, out.Response)
			assert.False(t, out.Response.Allowed, "a DynamoGraphDeployment without services must still be denied")
			if tc.latency > 0 {
				assert.GreaterOrEqual(t, elapsed, tc.latency)
			} else {
				assert.Less(t, elapsed, delay, "a request without latency injection took %s", elapsed)
			}
		})
	}
}
