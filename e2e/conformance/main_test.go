// Package conformance is the webhook contract's suite (`make e2e-conformance TARGET=<name|path>`):
// the target --target names (default gauntlet) installed from its description in the
// certificate mode --target-mode names, then every W check of scenarios/catalog/contract.
// Reports go to _output/e2e/conformance-<target>-<mode>.
package conformance

import (
	"os"
	"testing"

	"github.com/gauntlet-dev/gauntlet/scenarios/catalog/contract"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"

	// Every cluster provider, chosen with --provider (PROVIDER).
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/providers"
)

var conformance = suite.New(suite.Spec{
	Name:     "conformance",
	Targets:  true,
	Features: contract.Features(),
})

func TestMain(m *testing.M) { os.Exit(conformance.Run(m)) }

func TestConformance(t *testing.T) { conformance.Test(t) }
