package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// exitError is what go test returns when it exits 1.
func exitError(t *testing.T) error {
	err := exec.Command("false").Run()
	require.Error(t, err)
	return err
}

// The engine's own words, as go1.26 prints them.
const (
	deadlineOutput = `fuzz: elapsed: 0s, gathering baseline coverage: 0/14 completed
fuzz: elapsed: 6s, execs: 25 (0/sec), new interesting: 0 (total: 14)
--- FAIL: FuzzValidateModel (6.01s)
    context deadline exceeded
FAIL
exit status 1
`
	stalledOutput = `fuzz: elapsed: 21s, execs: 4398 (0/sec), new interesting: 2 (total: 304)
--- FAIL: FuzzValidateModel (23.23s)
    fuzzing process hung or terminated unexpectedly: exit status 2
    Failing input written to testdata/fuzz/FuzzValidateModel/447ffa6326d3330f
    To re-run:
    go test -run=FuzzValidateModel/447ffa6326d3330f
FAIL
`
	findingOutput = `fuzz: elapsed: 3s, execs: 1340 (446/sec), new interesting: 4 (total: 18)
--- FAIL: FuzzValidateModel (3.12s)
    --- FAIL: FuzzValidateModel (0.00s)
        fuzz_test.go:97: code 500 (boom) for "{}"
    Failing input written to testdata/fuzz/FuzzValidateModel/0123456789abcdef
FAIL
`
)

func TestJudgeTellsAFindingFromTheEngineStoppingOnABusyMachine(t *testing.T) {
	passes := func(run string) (string, error) {
		return "=== RUN   FuzzValidateModel/447ffa6326d3330f\n--- PASS: FuzzValidateModel/447ffa6326d3330f (0.01s)\nPASS\n", nil
	}
	fails := func(run string) (string, error) {
		return "=== RUN   FuzzValidateModel/0123456789abcdef\n    fuzz_test.go:97: code 500 (boom)\n--- FAIL: FuzzValidateModel/0123456789abcdef (0.00s)\n=== RUN   FuzzValidateModel/seed#2\n--- PASS: FuzzValidateModel/seed#2 (0.00s)\nFAIL\n", exitError(t)
	}
	var replayed []string
	recording := func(replay func(string) (string, error)) func(string) (string, error) {
		replayed = nil
		return func(run string) (string, error) { replayed = append(replayed, run); return replay(run) }
	}

	v := judge("FuzzValidateModel", []byte("fuzz: elapsed: 5s, execs: 2387 (477/sec), new interesting: 1 (total: 25)\nPASS\n"), nil, recording(fails))
	assert.Equal(t, verdict{passed, "elapsed: 5s, execs: 2387 (477/sec), new interesting: 1 (total: 25)"}, v)
	assert.Empty(t, replayed, "a passing run is not replayed")

	v = judge("FuzzValidateModel", []byte(deadlineOutput), exitError(t), recording(passes))
	assert.Equal(t, unreproducible, v.kind, v.detail)
	assert.Contains(t, v.detail, "golang/go#51484")
	assert.Equal(t, []string{"^FuzzValidateModel$"}, replayed, "the seed corpus is replayed")

	v = judge("FuzzValidateModel", []byte(deadlineOutput), exitError(t), recording(fails))
	assert.Equal(t, failed, v.kind, "a deadline with a failing seed corpus is a finding: %s", v.detail)
	assert.Contains(t, v.detail, "the seed corpus fails:\n        fuzz_test.go:97: code 500 (boom)\n    --- FAIL: FuzzValidateModel/0123456789abcdef (0.00s)\n    FAIL")

	v = judge("FuzzValidateModel", []byte(stalledOutput), exitError(t), recording(passes))
	assert.Equal(t, unreproducible, v.kind, v.detail)
	assert.Contains(t, v.detail, "447ffa6326d3330f, which passes when replayed")
	assert.Equal(t, []string{"^FuzzValidateModel$/^447ffa6326d3330f$"}, replayed, "the written input is replayed")

	slow := func(run string) (string, error) {
		return "=== RUN   FuzzValidateModel/447ffa6326d3330f\n--- PASS: FuzzValidateModel/447ffa6326d3330f (12.31s)\nPASS\n", nil
	}
	v = judge("FuzzValidateModel", []byte(stalledOutput), exitError(t), recording(slow))
	assert.Equal(t, failed, v.kind, "an input that takes the engine's limit or longer when replayed is a finding: %s", v.detail)
	assert.Contains(t, v.detail, "takes longer than the engine's 10s per input when replayed")

	v = judge("FuzzValidateModel", []byte(stalledOutput), exitError(t), recording(fails))
	assert.Equal(t, failed, v.kind, "a stalled worker's input that fails again is a finding (a real hang or crash): %s", v.detail)

	v = judge("FuzzValidateModel", []byte(findingOutput), exitError(t), recording(fails))
	assert.Equal(t, failed, v.kind, v.detail)
	assert.Contains(t, v.detail, "a finding: the input 0123456789abcdef fails when replayed:\n        fuzz_test.go:97: code 500 (boom)\n    --- FAIL: FuzzValidateModel/0123456789abcdef (0.00s)")

	v = judge("FuzzValidateModel", []byte(findingOutput), exitError(t), recording(passes))
	assert.Equal(t, failed, v.kind, "a finding that passes on replay depends on state and is still reported: %s", v.detail)
	assert.Contains(t, v.detail, "fuzz_test.go:97: code 500 (boom)")

	v = judge("FuzzValidateModel", []byte("webhook_test.go:12:2: undefined: foo\nFAIL\n"), exitError(t), recording(passes))
	assert.Equal(t, failed, v.kind, v.detail)
	assert.Contains(t, v.detail, "undefined: foo")
	assert.Empty(t, replayed)

	v = judge("FuzzValidateModel", nil, errors.New(`exec: "go": executable file not found in $PATH`), recording(passes))
	assert.Equal(t, verdict{failed, `go test did not run: exec: "go": executable file not found in $PATH`}, v)
}

func TestFindTargetsListsTheWorkspacesFuzzTargets(t *testing.T) {
	root, err := workspace.Root()
	require.NoError(t, err)
	targets, err := findTargets(root)
	require.NoError(t, err)
	assert.Contains(t, targets, target{Dir: "operator/internal/webhook", Name: "FuzzValidateModel"})
	assert.Contains(t, targets, target{Dir: "operator/internal/webhook", Name: "FuzzConvert"})
}

func TestKeepMovesTheInputOutOfTheSourceTree(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	input := "testdata/fuzz/FuzzX/0123"
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "testdata/fuzz/FuzzX"), 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(dir, input), []byte("go test fuzz v1\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "testdata/golden.json"), nil, 0o600))

	dst := filepath.Join(out, "FuzzX-0123")
	assert.Equal(t, dst, keep(dir, input, dst))
	assert.FileExists(t, dst)
	assert.NoDirExists(t, filepath.Join(dir, "testdata/fuzz"), "the directories the engine made are gone")
	assert.FileExists(t, filepath.Join(dir, "testdata/golden.json"), "what was there before stays")
}
