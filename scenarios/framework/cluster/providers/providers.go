// Package providers links every cluster provider into a program: import it for its side
// effect, as the e2e suites do, and choose one by name (cluster.Lookup).
package providers

import (
	// Each registers itself in init.
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/existing"
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/kind"
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/local"
)
