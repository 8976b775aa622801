// Package externalcert is the external certificate-mode suite (`make e2e-external-certs`): the
// operator installed with a Secret and webhook.caBundle the suite made itself (a CA and a
// serving certificate from crypto/x509), then every certificate scenario of that mode —
// including the OLM-style mount — and every admission and conversion scenario. Reports go to
// _output/e2e/externalcert.
package externalcert

import (
	"os"
	"slices"
	"testing"

	"github.com/gauntlet-dev/gauntlet/scenarios/catalog/admission"
	"github.com/gauntlet-dev/gauntlet/scenarios/catalog/certmodes"
	"github.com/gauntlet-dev/gauntlet/scenarios/catalog/conversion"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"

	// Every cluster provider, chosen with --provider (PROVIDER).
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/providers"
)

var external = suite.New(suite.Spec{
	Name: "externalcert",
	Release: &chart.Release{
		Mode: chart.External,
		// A short check interval lets C9 watch the operator through several periodic checks
		// (it must never write the user's Secret) in seconds instead of minutes.
		Values: map[string]any{"webhook": map[string]any{"checkInterval": "5s"}},
	},
	Features: slices.Concat(certmodes.Features(), conversion.Features(), admission.Features()),
})

func TestMain(m *testing.M) { os.Exit(external.Run(m)) }

func TestExternalCert(t *testing.T) { external.Test(t) }
