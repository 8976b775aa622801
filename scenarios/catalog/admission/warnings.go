package admission

import (
	"context"
	"sync"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// warningRecorder keeps the warnings the API server sends back (the Warning headers kubectl
// prints as "Warning: …"), which is where admission webhooks' warnings reach users.
type warningRecorder struct {
	mu       sync.Mutex
	messages []string
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, code int, _, message string) {
	if code != 299 || message == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.messages = append(w.messages, message)
}

// withWarnings runs request with a client of its own and returns the warnings the API server
// sent with the responses, in order, and request's error.
func withWarnings(t *testing.T, c *suite.Cluster, request func(dynamic.Interface) error) ([]string, error) {
	t.Helper()
	rec := &warningRecorder{}
	cfg := c.RESTConfig()
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = rec
	dyn, err := dynamic.NewForConfig(cfg)
	expect.NoError(t, err, "building a client that records warnings")
	err = request(dyn)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.messages, err
}

var _ rest.WarningHandlerWithContext = (*warningRecorder)(nil)
