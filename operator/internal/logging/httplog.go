package logging

import (
	"io"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// HandshakeLogInterval is how often, at most, a TLS handshake error is logged at info level.
const HandshakeLogInterval = 10 * time.Second

const handshakePrefix = "http: TLS handshake error from "

// HTTPErrorLog is an io.Writer for a log.Logger (a net/http server's ErrorLog, or the standard
// library's default logger) that turns each line into an entry of l:
//   - "http: TLS handshake error from <addr>: <reason>" becomes "TLS handshake error" with
//     remote and error: at info at most once per HandshakeLogInterval (with
//     suppressedSinceLast, the number logged only at debug in between), at V(1) otherwise;
//   - "http: panic serving …" becomes an error entry;
//   - any other line an info entry with the line as the message.
func HTTPErrorLog(l logr.Logger) io.Writer {
	return &httpErrorLog{log: l, every: HandshakeLogInterval, now: time.Now}
}

type httpErrorLog struct {
	log   logr.Logger
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (h *httpErrorLog) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\r\n")
	switch {
	case strings.HasPrefix(line, handshakePrefix):
		remote, reason, _ := strings.Cut(strings.TrimPrefix(line, handshakePrefix), ": ")
		h.handshake(remote, reason)
	case strings.HasPrefix(line, "http: panic serving"):
		h.log.Error(nil, line)
	default:
		h.log.Info(line)
	}
	return len(p), nil
}

func (h *httpErrorLog) handshake(remote, reason string) {
	h.mu.Lock()
	now := h.now()
	if !h.last.IsZero() && now.Sub(h.last) < h.every {
		h.suppressed++
		h.mu.Unlock()
		h.log.V(1).Info("TLS handshake error", "remote", remote, "error", reason)
		return
	}
	suppressed := h.suppressed
	h.last, h.suppressed = now, 0
	h.mu.Unlock()
	h.log.Info("TLS handshake error", "remote", remote, "error", reason,
		"suppressedSinceLast", suppressed, "logEvery", h.every.String())
}
