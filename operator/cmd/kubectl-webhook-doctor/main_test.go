package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/operator/doctorreport"
	"github.com/gauntlet-dev/gauntlet/operator/internal/plugin"
	"github.com/gauntlet-dev/gauntlet/operator/internal/plugin/plugintest"
)

func TestUsage(t *testing.T) {
	cases := []struct {
		args   []string
		code   int
		stderr string
	}{
		{args: nil, code: plugin.ExitUsage, stderr: "--namespace is required: the namespace of the webhook Service"},
		{args: []string{"--help"}, code: plugin.ExitHealthy, stderr: "Usage: kubectl webhook-doctor --namespace NS [flags]"},
		{args: []string{"--help"}, code: plugin.ExitHealthy, stderr: "--secret string"},
		{args: []string{"-n", "x", "-o", "yaml"}, code: plugin.ExitUsage, stderr: `-o "yaml": want text or json`},
		{args: []string{"-n", "x", "extra"}, code: plugin.ExitUsage, stderr: "unexpected arguments: [extra]"},
		{args: []string{"-n", "x", "--timeout=0s"}, code: plugin.ExitUsage, stderr: "--timeout=0s: must be positive"},
		{args: []string{"-n", "x", "--connect=direct"}, code: plugin.ExitUsage, stderr: "--connect=direct: want auto or port-forward"},
		{args: []string{"-n", "x", "--release", "dynamo"}, code: plugin.ExitUsage, stderr: "unknown flag: --release"},
		{args: []string{"-n", "x", "--kubeconfig", "/nonexistent/kubeconfig"}, code: plugin.ExitUsage, stderr: "loading kubeconfig"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			assert.Equal(t, tc.code, code, "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), tc.stderr)
		})
	}
}

// TestAgainstUnreachableCluster: with the API server gone the names cannot be discovered, and
// the report is the release doctor's: api-server the one root cause, every generic check
// skipped because of it, exit status 1. (The checks against a live API server are tested in
// internal/doctor.)
func TestAgainstUnreachableCluster(t *testing.T) {
	kubeconfig := plugintest.UnreachableKubeconfig(t)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--kubeconfig", kubeconfig, "-n", "policy-system", "-o", "json", "--timeout", "20s"}, &stdout, &stderr)
	assert.Equal(t, plugin.ExitUnhealthy, code, "stderr: %s", stderr.String())
	var results []doctorreport.Result
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &results), stdout.String())
	var ids []string
	for _, r := range results {
		ids = append(ids, r.ID)
	}
	assert.Equal(t, []string{"api-server", "certificate-secret", "webhook-configurations", "ca-bundle", "namespace-selector",
		"webhook-service", "service-endpoints", "serving-certificate", "admission-dry-run"}, ids)
	assert.Equal(t, doctorreport.StatusFail, results[0].Status)
	for _, r := range results[1:] {
		assert.Equal(t, doctorreport.StatusSkipped, r.Status, r.ID)
		assert.Equal(t, []string{"api-server"}, r.DependsOn, r.ID)
	}
}
