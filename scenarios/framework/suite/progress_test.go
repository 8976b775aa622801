package suite

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
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
