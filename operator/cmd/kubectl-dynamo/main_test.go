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
	"github.com/gauntlet-dev/gauntlet/operator/internal/plugin/plugintest"
)

func TestUsage(t *testing.T) {
	cases := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{args: nil, code: exitUsage, stderr: "kubectl dynamo doctor [flags]"},
		{args: []string{"help"}, code: exitHealthy, stdout: "kubectl dynamo doctor [flags]"},
		{args: []string{"frobnicate"}, code: exitUsage, stderr: `unknown command "frobnicate"`},
		{args: []string{"doctor", "--help"}, code: exitHealthy, stderr: "--test-namespace"},
		{args: []string{"doctor", "-o", "yaml"}, code: exitUsage, stderr: `-o "yaml": want text or json`},
		{args: []string{"doctor", "extra"}, code: exitUsage, stderr: "unexpected arguments: [extra]"},
		{args: []string{"doctor", "--timeout=0s"}, code: exitUsage, stderr: "--timeout=0s: must be positive"},
		{args: []string{"doctor", "--no-such-flag"}, code: exitUsage, stderr: "unknown flag: --no-such-flag"},
		{args: []string{"doctor", "--connect=direct"}, code: exitUsage, stderr: "--connect=direct: want auto or port-forward"},
		{args: []string{"doctor", "--connect", ""}, code: exitUsage, stderr: "--connect=: want auto or port-forward"},
		{args: []string{"doctor", "--help"}, code: exitHealthy, stderr: "--connect string"},
		{args: []string{"doctor", "--kubeconfig", "/nonexistent/kubeconfig"}, code: exitUsage, stderr: "loading kubeconfig"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			assert.Equal(t, tc.code, code, "stderr: %s", stderr.String())
			if tc.stdout != "" {
				assert.Contains(t, stdout.String(), tc.stdout)
			}
			if tc.stderr != "" {
				assert.Contains(t, stderr.String(), tc.stderr)
			}
		})
	}
}

// TestDoctorAgainstUnreachableCluster runs the whole command: with the API server gone, the
// one root cause is the api-server check, every other check is skipped because of it, and
// the exit status is 1. (The doctor's checks against a live API server are tested in
// internal/doctor.)
func TestDoctorAgainstUnreachableCluster(t *testing.T) {
	kubeconfig := plugintest.UnreachableKubeconfig(t)

	t.Run("text", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"doctor", "--kubeconfig", kubeconfig, "--context", "gone", "--timeout", "20s"}, &stdout, &stderr)
		assert.Equal(t, exitUnhealthy, code, "stderr: %s", stderr.String())
		out := stdout.String()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		assert.True(t, strings.HasPrefix(lines[0], "✗ api-server"), out)
		assert.Contains(t, out, "cannot reach the API server at https://127.0.0.1:")
		assert.Contains(t, out, "kubectl cluster-info")
		assert.Contains(t, out, "– admission-dry-run")
		assert.Contains(t, out, "(skipped: depends on api-server)")
		assert.Equal(t, "unhealthy: 1 root cause: api-server; 0 consequential failures, 11 skipped", lines[len(lines)-1])
	})

	t.Run("--connect=port-forward", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"doctor", "--kubeconfig", kubeconfig, "--context", "gone", "--timeout", "20s", "--connect=port-forward"}, &stdout, &stderr)
		assert.Equal(t, exitUnhealthy, code, "stderr: %s", stderr.String())
		assert.True(t, strings.HasPrefix(stdout.String(), "✗ api-server"), stdout.String())
	})

	t.Run("json", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"doctor", "--kubeconfig", kubeconfig, "-o", "json", "--release", "r", "-n", "ns"}, &stdout, &stderr)
		assert.Equal(t, exitUnhealthy, code, "stderr: %s", stderr.String())
		var results []doctorreport.Result
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &results), stdout.String())
		require.Len(t, results, 12)
		assert.Equal(t, "api-server", results[0].ID)
		assert.Equal(t, doctorreport.StatusFail, results[0].Status)
		assert.False(t, results[0].OK)
		assert.NotEmpty(t, results[0].Fix)
		for _, r := range results[1:] {
			assert.Equal(t, doctorreport.StatusSkipped, r.Status, r.ID)
			assert.Equal(t, []string{"api-server"}, r.DependsOn, r.ID)
		}
		dep := results[1]
		assert.Equal(t, "operator-deployment", dep.ID)
	})
}
