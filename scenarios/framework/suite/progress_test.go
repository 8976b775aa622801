package suite

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/steps"
)

func TestProgressStepStampsItsBeginningAndItsEnd(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out)
	_ = p.step("Preparing the release", func() error { return nil })
	_ = p.step("Installing charts/dynamo-operator", func() error { return errors.New("timed out\nlast seen: 0/1 ready") })
	stamp := `\[ *\d+\.\ds\] `
	assert.Regexp(t, `^`+
		stamp+`• Preparing the release …\n`+
		stamp+`✓ Preparing the release \(\d+\.\ds\)\n`+
		stamp+`• Installing charts/dynamo-operator …\n`+
		stamp+`✗ Installing charts/dynamo-operator \(\d+\.\ds\): timed out\n`+
		stamp+`last seen: 0/1 ready\n$`, out.String())
}

func TestTheStepsAProviderPrintsAreKeptAsPhasesOfTheOneAroundThem(t *testing.T) {
	p := newProgress(&bytes.Buffer{})
	_ = p.phase("Bringing up local cluster c", func() error {
		provider := steps.New(p.writer()) // as a provider prints its creation's steps
		_ = provider.Step("Preparing binaries", func() error { return nil })
		return provider.Step("Starting control plane", func() error { return errors.New("no etcd") })
	})
	_ = p.step("Installing charts/dynamo-operator", func() error { return nil })

	var got []string
	for _, ph := range p.profile("s", "").phases {
		got = append(got, fmt.Sprintf("%s nested=%t", ph.title, ph.nested))
	}
	assert.Equal(t, []string{
		"Bringing up local cluster c nested=false",
		"Preparing binaries nested=true",
		"Starting control plane nested=true",
		"Installing charts/dynamo-operator nested=false",
	}, got)
}
