package logging

import "github.com/go-logr/logr"

// DeferValues returns l with WithValues deferred: the key-value pairs are kept as given and
// handed to l's sink only when an entry is written. An entry comes out as it would from l.
//
// It is for loggers built per request and rarely written to: controller-runtime builds one
// for every admission request (admission.Webhook's LogConstructor) with the request's object,
// resource, user and uid, and writes to it only at V(5) or on a failure. zap encodes values as
// WithValues receives them, which cost more per request than anything the webhook itself did.
func DeferValues(l logr.Logger) logr.Logger {
	sink := l.GetSink()
	if sink == nil {
		return l
	}
	// Entries are written one call deeper (through deferredSink), which a sink that reports
	// its caller must skip.
	if d, ok := sink.(logr.CallDepthLogSink); ok {
		sink = d.WithCallDepth(1)
	}
	return l.WithSink(deferredSink{sink: sink})
}

// deferredSink is a LogSink whose WithValues only records the pairs (see DeferValues).
type deferredSink struct {
	sink logr.LogSink
	kv   []any
}

func (d deferredSink) Init(info logr.RuntimeInfo) { d.sink.Init(info) }

func (d deferredSink) Enabled(level int) bool { return d.sink.Enabled(level) }

func (d deferredSink) Info(level int, msg string, kv ...any) {
	d.resolved().Info(level, msg, kv...)
}

func (d deferredSink) Error(err error, msg string, kv ...any) {
	d.resolved().Error(err, msg, kv...)
}

func (d deferredSink) WithValues(kv ...any) logr.LogSink {
	// A new slice each time: siblings derived from one logger must not share appends.
	return deferredSink{sink: d.sink, kv: append(append(make([]any, 0, len(d.kv)+len(kv)), d.kv...), kv...)}
}

func (d deferredSink) WithName(name string) logr.LogSink {
	return deferredSink{sink: d.sink.WithName(name), kv: d.kv}
}

func (d deferredSink) WithCallDepth(depth int) logr.LogSink {
	if s, ok := d.sink.(logr.CallDepthLogSink); ok {
		return deferredSink{sink: s.WithCallDepth(depth), kv: d.kv}
	}
	return d
}

// resolved is the sink with the deferred pairs applied.
func (d deferredSink) resolved() logr.LogSink {
	if len(d.kv) == 0 {
		return d.sink
	}
	return d.sink.WithValues(d.kv...)
}
