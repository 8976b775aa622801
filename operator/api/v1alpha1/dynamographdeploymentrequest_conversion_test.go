package v1alpha1

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

func alphaRequest() *DynamoGraphDeploymentRequest {
	return &DynamoGraphDeploymentRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   "team-a",
			Name:        "profile-llama",
			Labels:      map[string]string{"team": "a"},
			Annotations: map[string]string{"note": "kept"},
			Finalizers:  []string{"nvidia.com/dgdr"},
		},
		Spec: DynamoGraphDeploymentRequestSpec{
			Model:   "meta-llama/Llama-3-8B",
			Backend: "vllm",
			ProfilingConfig: &ProfilingConfig{
				ProfilerImage:     "nvcr.io/dynamo/profiler:1.0",
				UseAIConfigurator: ptr.To(true),
			},
			AutoApply: true,
			SLA:       &SLA{TTFT: 200, ITL: 20},
		},
		Status: DynamoGraphDeploymentRequestStatus{
			State:              "Profiling",
			ObservedGeneration: 3,
			Conditions: []metav1.Condition{{
				Type: "Ready", Status: metav1.ConditionFalse, Reason: "Profiling", Message: "profiling",
				LastTransitionTime: metav1.Unix(1700000000, 0),
			}},
		},
	}
}

func TestConvertTo(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*DynamoGraphDeploymentRequest)
		want   func(*v1beta1.DynamoGraphDeploymentRequest)
	}{
		{
			name: "A8/every field maps",
			want: func(h *v1beta1.DynamoGraphDeploymentRequest) {},
		},
		{
			name:   "A8/useAIConfigurator false is a thorough search",
			mutate: func(r *DynamoGraphDeploymentRequest) { r.Spec.ProfilingConfig.UseAIConfigurator = ptr.To(false) },
			want:   func(h *v1beta1.DynamoGraphDeploymentRequest) { h.Spec.SearchStrategy = v1beta1.SearchStrategyThorough },
		},
		{
			name:   "A8/useAIConfigurator unset leaves the search strategy unset",
			mutate: func(r *DynamoGraphDeploymentRequest) { r.Spec.ProfilingConfig.UseAIConfigurator = nil },
			want:   func(h *v1beta1.DynamoGraphDeploymentRequest) { h.Spec.SearchStrategy = "" },
		},
		{
			name: "A8/no profilingConfig and no sla",
			mutate: func(r *DynamoGraphDeploymentRequest) {
				r.Spec.ProfilingConfig, r.Spec.SLA = nil, nil
			},
			want: func(h *v1beta1.DynamoGraphDeploymentRequest) {
				h.Spec.Image, h.Spec.SearchStrategy, h.Spec.SLA = "", "", nil
			},
		},
		{
			name: "A8/an empty profilingConfig has no v1beta1 counterpart",
			mutate: func(r *DynamoGraphDeploymentRequest) {
				r.Spec.ProfilingConfig = &ProfilingConfig{}
			},
			want: func(h *v1beta1.DynamoGraphDeploymentRequest) { h.Spec.Image, h.Spec.SearchStrategy = "", "" },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := alphaRequest()
			if tc.mutate != nil {
				tc.mutate(src)
			}
			before := src.DeepCopy()
			want := &v1beta1.DynamoGraphDeploymentRequest{
				ObjectMeta: src.ObjectMeta,
				Spec: v1beta1.DynamoGraphDeploymentRequestSpec{
					Model:          "meta-llama/Llama-3-8B",
					Backend:        v1beta1.BackendVLLM,
					Image:          "nvcr.io/dynamo/profiler:1.0",
					SearchStrategy: v1beta1.SearchStrategyRapid,
					AutoApply:      true,
					SLA:            &v1beta1.SLA{TTFTMilliseconds: 200, ITLMilliseconds: 20},
				},
				Status: v1beta1.DynamoGraphDeploymentRequestStatus{
					Phase:              v1beta1.PhaseProfiling,
					ObservedGeneration: 3,
					Conditions:         src.Status.Conditions,
				},
			}
			tc.want(want)

			got := &v1beta1.DynamoGraphDeploymentRequest{}
			require.NoError(t, src.ConvertTo(got))
			assert.Equal(t, want, got)
			assert.Equal(t, before, src, "ConvertTo must not modify its receiver")
		})
	}
}

func TestConvertFromUnrepresentableSearchStrategy(t *testing.T) {
	hub := &v1beta1.DynamoGraphDeploymentRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "r"},
		Spec:       v1beta1.DynamoGraphDeploymentRequestSpec{SearchStrategy: "exhaustive"},
	}

	t.Run("A8/kept in the conversion annotation", func(t *testing.T) {
		spoke := &DynamoGraphDeploymentRequest{}
		require.NoError(t, spoke.ConvertFrom(hub))
		assert.Nil(t, spoke.Spec.ProfilingConfig)
		assert.JSONEq(t, `{"searchStrategy":"exhaustive"}`, spoke.Annotations[DGDRConversionAnnotation])

		back := &v1beta1.DynamoGraphDeploymentRequest{}
		require.NoError(t, spoke.ConvertTo(back))
		assert.Equal(t, hub, back)
		assert.NotContains(t, back.Annotations, DGDRConversionAnnotation, "the annotation must not leak into the hub")
	})

	t.Run("A8/a choice made in v1alpha1 wins over the annotation", func(t *testing.T) {
		spoke := &DynamoGraphDeploymentRequest{}
		require.NoError(t, spoke.ConvertFrom(hub))
		spoke.Spec.ProfilingConfig = &ProfilingConfig{UseAIConfigurator: ptr.To(true)}

		back := &v1beta1.DynamoGraphDeploymentRequest{}
		require.NoError(t, spoke.ConvertTo(back))
		assert.Equal(t, v1beta1.SearchStrategyRapid, back.Spec.SearchStrategy)
		assert.Nil(t, back.Annotations)
	})

	t.Run("A8/an annotation set by hand on the hub is dropped", func(t *testing.T) {
		h := hub.DeepCopy()
		h.Spec.SearchStrategy = v1beta1.SearchStrategyThorough
		h.Annotations = map[string]string{DGDRConversionAnnotation: "not json"}
		spoke := &DynamoGraphDeploymentRequest{}
		require.NoError(t, spoke.ConvertFrom(h))
		assert.Nil(t, spoke.Annotations)
		assert.Equal(t, ptr.To(false), spoke.Spec.ProfilingConfig.UseAIConfigurator)
	})

	t.Run("A8/a malformed annotation fails the conversion with the object's name", func(t *testing.T) {
		spoke := alphaRequest()
		spoke.Annotations[DGDRConversionAnnotation] = "{"
		err := spoke.ConvertTo(&v1beta1.DynamoGraphDeploymentRequest{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "converting DynamoGraphDeploymentRequest team-a/profile-llama to v1beta1")
		assert.Contains(t, err.Error(), DGDRConversionAnnotation)
	})
}

// filler fills objects with random values; the seed is logged so a failure can be replayed.
func filler(t *testing.T) *randfill.Filler {
	seed := time.Now().UnixNano()
	t.Logf("random seed %d", seed)
	return randfill.NewWithSeed(seed).NilChance(0.3).NumElements(0, 3).Funcs(
		// metav1.Time only keeps second precision on the wire; the property is about our
		// mapping, so keep times simple.
		func(tm *metav1.Time, c randfill.Continue) { *tm = metav1.Unix(c.Int63n(1<<32), 0) },
		// nil and empty maps are the same object on the wire.
		func(m *map[string]string, c randfill.Continue) {
			*m = nil
			for range c.Intn(3) {
				if *m == nil {
					*m = map[string]string{}
				}
				(*m)[c.String(8)] = c.String(8)
			}
		},
	)
}

func TestRoundTripProperty(t *testing.T) {
	const iterations = 2000

	t.Run("A8/v1alpha1 to v1beta1 and back is lossless", func(t *testing.T) {
		f := filler(t)
		for range iterations {
			src := &DynamoGraphDeploymentRequest{}
			f.Fill(src)
			// apiVersion and kind are set by the conversion webhook, not by the mapping.
			src.TypeMeta = metav1.TypeMeta{}
			// An empty profilingConfig is the one v1alpha1 value v1beta1 cannot hold
			// (see TestConvertTo); it means the same as none.
			if pc := src.Spec.ProfilingConfig; pc != nil && pc.ProfilerImage == "" && pc.UseAIConfigurator == nil {
				src.Spec.ProfilingConfig = nil
			}
			delete(src.Annotations, DGDRConversionAnnotation)

			hub := &v1beta1.DynamoGraphDeploymentRequest{}
			require.NoError(t, src.ConvertTo(hub))
			require.NotContains(t, hub.Annotations, DGDRConversionAnnotation)
			back := &DynamoGraphDeploymentRequest{}
			require.NoError(t, back.ConvertFrom(hub))
			require.Equal(t, src, back)
		}
	})

	t.Run("A8/v1beta1 to v1alpha1 and back is lossless", func(t *testing.T) {
		f := filler(t)
		strategies := []v1beta1.SearchStrategy{"", v1beta1.SearchStrategyRapid, v1beta1.SearchStrategyThorough}
		for i := range iterations {
			src := &v1beta1.DynamoGraphDeploymentRequest{}
			f.Fill(src)
			src.TypeMeta = metav1.TypeMeta{}
			// Mostly the values v1beta1 admits, sometimes arbitrary ones.
			if i%4 != 0 {
				src.Spec.SearchStrategy = strategies[i%len(strategies)]
			}
			delete(src.Annotations, DGDRConversionAnnotation)
			if len(src.Annotations) == 0 {
				src.Annotations = nil
			}

			spoke := &DynamoGraphDeploymentRequest{}
			require.NoError(t, spoke.ConvertFrom(src))
			back := &v1beta1.DynamoGraphDeploymentRequest{}
			require.NoError(t, spoke.ConvertTo(back))
			require.Equal(t, src, back)
		}
	})
}
