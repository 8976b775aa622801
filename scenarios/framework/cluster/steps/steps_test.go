package steps_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/steps"
)

var errNoDocker = errors.New("no Docker")

func run(p *steps.Printer) {
	_ = p.Step("Starting control plane", func() error { return nil })
	_ = p.Step("Creating nodes", func() error { return errNoDocker })
}

func TestNewPrintsAColumnPerStepOnceItEnded(t *testing.T) {
	var out bytes.Buffer
	run(steps.New(&out))
	assert.Regexp(t, `^ ✓ Starting control plane {32}   \d+\.\ds\n ✗ Creating nodes {40}   \d+\.\ds\n$`, out.String())
}

func TestNewLogPrintsWhereAStepBeginsAndHowItEnded(t *testing.T) {
	var out bytes.Buffer
	run(steps.NewLog(&out))
	assert.Regexp(t, `^• Starting control plane …\n✓ Starting control plane \(\d+\.\ds\)\n`+
		`• Creating nodes …\n✗ Creating nodes \(\d+\.\ds\): no Docker\n$`, out.String())
}

func TestStepReturnsTheStepsError(t *testing.T) {
	for name, p := range map[string]*steps.Printer{"New": steps.New(nil), "NewLog": steps.NewLog(&bytes.Buffer{})} {
		require.ErrorIs(t, p.Step("Creating nodes", func() error { return errNoDocker }), errNoDocker, name)
		require.NoError(t, p.Step("Starting control plane", func() error { return nil }), name)
	}
}
