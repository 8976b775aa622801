// Package certmanager is the cert-manager certificate-mode suite (`make e2e-cert-manager`): a
// cluster with cert-manager, the operator installed with webhook.certManager.enabled (the
// chart's own CA chain), then every certificate scenario of that mode and every admission
// and conversion scenario. Reports go to _output/e2e/certmanager.
package certmanager

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

var certManager = suite.New(suite.Spec{
	Name:        "certmanager",
	CertManager: true,
	Release:     &chart.Release{Mode: chart.CertManager},
	Features:    slices.Concat(certmodes.Features(), conversion.Features(), admission.Features()),
})

func TestMain(m *testing.M) { os.Exit(certManager.Run(m)) }

func TestCertManager(t *testing.T) { certManager.Test(t) }
