// Package logging builds the operator's one structured log stream. Everything the process
// logs goes through it as JSON lines (controller-runtime's zap encoder): controller-runtime's
// own loggers, client-go's klog, and the standard library's log package, which net/http
// servers without an ErrorLog write to (TLS handshake errors and other connection-level
// failures of the webhook, metrics and probe servers).
//
// Two kinds of entries are shaped for volume because whoever reaches a port controls how many
// there are: controller-runtime's admission and conversion handlers log every malformed
// request as an error with a stack trace, here they are one info line with the reason; TLS
// handshake errors are logged at info at most once per HandshakeLogInterval, with the number
// left out since, and every one of them at debug level (V(1)).
package logging

import (
	"io"
	stdlog "log"

	"github.com/go-logr/logr"
	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// requestLoggers are the names controller-runtime gives the loggers of its webhook request
// handlers (pkg/webhook/admission and pkg/webhook/conversion). Every error they log is about
// one request the client got wrong, or a connection it dropped, and the client got the error
// in its response.
var requestLoggers = map[string]bool{"admission": true, "conversion-webhook": true}

// New returns the operator's logger writing to w, configured by opts (the --zap-* flags):
// JSON lines unless --zap-devel, with the request handlers' errors logged as info lines, and
// nothing sampled away. controller-runtime's production logger samples (after 100 entries with
// the same message in a second it keeps one in 100), which would drop the validate create /
// validate update line of an admission in a burst; it skips sampling when the level is debug
// as it builds the logger, and the level is atomic: build at debug, then set the level asked for.
func New(opts zap.Options, w io.Writer) logr.Logger {
	want := zapcore.InfoLevel // controller-runtime's defaults
	if opts.Development {
		want = zapcore.DebugLevel
	}
	if opts.Level != nil {
		want = zapcore.LevelOf(opts.Level)
	}
	level := uberzap.NewAtomicLevelAt(zapcore.Level(-2))
	opts.Level = level
	l := zap.New(zap.UseFlagOptions(&opts), zap.WriteTo(w))
	level.SetLevel(want)
	return logr.New(requestErrorSink{LogSink: l.GetSink()})
}

// Install makes l the logger of controller-runtime, of klog and of the standard library's log
// package, whose lines become entries of the logger "http" (see HTTPErrorLog). Call it once,
// before anything logs.
func Install(l logr.Logger) {
	ctrl.SetLogger(l)
	klog.SetLogger(l.WithName("klog"))
	stdlog.SetFlags(0)
	stdlog.SetPrefix("")
	stdlog.SetOutput(HTTPErrorLog(l.WithName("http")))
}

// requestErrorSink logs Error calls of the request loggers, and of their descendants, as info
// entries that carry the error as "error": no error level, no stack trace.
type requestErrorSink struct {
	logr.LogSink
	request bool
}

func (s requestErrorSink) WithName(name string) logr.LogSink {
	return requestErrorSink{LogSink: s.LogSink.WithName(name), request: s.request || requestLoggers[name]}
}

func (s requestErrorSink) WithValues(kv ...any) logr.LogSink {
	return requestErrorSink{LogSink: s.LogSink.WithValues(kv...), request: s.request}
}

func (s requestErrorSink) WithCallDepth(depth int) logr.LogSink {
	if d, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return requestErrorSink{LogSink: d.WithCallDepth(depth), request: s.request}
	}
	return s
}

func (s requestErrorSink) Error(err error, msg string, kv ...any) {
	if !s.request {
		s.LogSink.Error(err, msg, kv...)
		return
	}
	if !s.Enabled(0) {
		return
	}
	if err != nil {
		kv = append(kv, "error", err.Error())
	}
	s.Info(0, msg, kv...)
}
