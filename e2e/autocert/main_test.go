// Package autocert is the automatic-certificate-mode suite (`make e2e-auto-certs`): the operator
// installed with its built-in cert-controller, then every certificate scenario of that mode and
// every admission scenario. Reports go to _output/e2e/autocert.
package autocert

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

var autocert = suite.New(suite.Spec{
	Name:     "autocert",
	Release:  &chart.Release{Mode: chart.Automatic},
	Features: slices.Concat(certmodes.Features(), conversion.Features(), admission.Features()),
})

func TestMain(m *testing.M) { os.Exit(autocert.Run(m)) }

func TestAutoCert(t *testing.T) { autocert.Test(t) }
