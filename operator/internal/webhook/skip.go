package webhook

import "context"

// skipRecorderKey keys the *skipRecorder that Observed puts into the context.
type skipRecorderKey struct{}

// skipRecorder is how an inner decorator tells Observed that it admitted a request without
// running the checks, so Observed records "skipped" instead of "allowed".
type skipRecorder struct {
	skipped bool
	reason  string
}

// withSkipRecorder returns a context in which markSkipped records into the returned recorder.
func withSkipRecorder(ctx context.Context) (context.Context, *skipRecorder) {
	rec := &skipRecorder{}
	return context.WithValue(ctx, skipRecorderKey{}, rec), rec
}

// markSkipped records that the request was admitted unchecked, and why. Without an Observed
// decorator around the call it does nothing.
func markSkipped(ctx context.Context, reason string) {
	if rec, ok := ctx.Value(skipRecorderKey{}).(*skipRecorder); ok {
		rec.skipped = true
		rec.reason = reason
	}
}
