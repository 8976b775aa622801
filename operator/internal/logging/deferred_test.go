package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// A logger whose values are deferred writes the entries the logger would have written with
// them, stack traces included.
func TestDeferredValuesComeOutAsGiven(t *testing.T) {
	for _, name := range []string{"admission", "cert-controller"} { // a request logger and another
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			l := New(zap.Options{}, &out).WithName(name)
			kv := []any{"requestID", types.UID("3f0c"), "n", 1}
			for _, log := range []logr.Logger{l.WithValues(kv...), DeferValues(l).WithValues(kv...)} {
				log.WithValues("more", "yes").WithName("child").Info("entry", "k", "v")
				log.Error(errors.New("boom"), "failed", "k", "v")
				log.V(1).Info("not written")
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			require.Len(t, lines, 4, out.String())
			for i := range 2 {
				assert.Equal(t, withoutTime(t, lines[i]), withoutTime(t, lines[i+2]))
			}
		})
	}
}

func withoutTime(t *testing.T, line string) map[string]any {
	t.Helper()
	var e map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &e), line)
	delete(e, "ts")
	return e
}
