// Package version holds the operator's version, stamped at build time with
// -ldflags "-X github.com/gauntlet-dev/gauntlet/operator/internal/version.Version=…".
package version

// Version is the operator's release version; the mutating webhook records it on
// DynamoGraphDeployments (nvidia.com/dynamo-operator-origin-version).
var Version = "0.1.0-dev"
