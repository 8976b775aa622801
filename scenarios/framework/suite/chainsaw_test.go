package suite

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEveryShippedTargetsChainsawTestsAreRowsOfTheSuite(t *testing.T) {
	for target, want := range map[string]string{
		"gatekeeper": "gatekeeper/assign-owner gatekeeper/require-owner gatekeeper/serving-certificate",
		"kyverno":    "kyverno/add-owner kyverno/policy-validation kyverno/require-owner",
		"gauntlet":   "gauntlet/graph-needs-a-service",
	} {
		t.Run(target, func(t *testing.T) {
			tg, _, err := loadTarget(target, "")
			require.NoError(t, err)
			s := &Suite{target: tg}
			feats, err := s.chainsawFeatures()
			require.NoError(t, err)
			assert.Equal(t, want, ids(feats))
			require.NoError(t, checkIDs(feats))
			for _, f := range feats {
				assert.True(t, f.Labels().Contains(LabelRunner, RunnerChainsaw), "%s can be selected with --labels=runner=chainsaw", scenarioID(f))
				assert.Empty(t, f.Labels()[LabelCertMode], "%s runs in every mode", scenarioID(f))
				assert.NotContains(t, f.Name(), "Chainsaw test ", "%s is titled by its description", scenarioID(f))
			}
		})
	}
}
