// Package admission holds the admission scenarios (CATALOG.md §A) as e2e-framework features,
// labelled scenario=<ID>. They hold in every certificate mode, so they carry no certmode label
// and every suite that installs the operator runs them. They assert what the API server tells
// a user: the objects admitted (and how they were mutated), the denial messages word for word,
// warnings, and the operator's log lines. Conversion (A8) lives in package conversion.
package admission

import (
	"sigs.k8s.io/e2e-framework/pkg/types"
)

// Features are the admission scenarios A1–A11. A11 takes the operator down and restores it
// in its teardown, so it runs last.
func Features() []types.Feature {
	return []types.Feature{
		sharedRules(),
		graphCreate(),
		graphUpdate(),
		componentUpdate(),
		modelRules(),
		requestRules(),
		mutatingDefaults(),
		denialsExplained(),
		finalizerRemoval(),
		celWithoutWebhook(),
	}
}
