package webhook

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/go-logr/logr"
)

// MaxRequestBytes bounds the body of every request the webhook server reads. It is
// controller-runtime's admission limit (7 MiB: two objects of at most 3 MiB each, the most the
// API server stores, plus 1 MiB for the rest of the review), which the admission paths already
// enforce; BoundedBody applies it to the paths controller-runtime leaves unbounded
// (/convert).
const MaxRequestBytes int64 = 7 << 20

// BoundedBody serves next with the request body limited to limit bytes. A larger request is
// answered 413 Request Entity Too Large with a one-line reason, and next never sees it: a
// declared Content-Length over the limit is refused before any of the body is read, and a body
// without one is read no further than limit+1 bytes. At most limit bytes are buffered per
// request, so memory stays bounded however many bodies arrive at once. Refusals are logged on
// log at info level: whoever can reach the port decides how many there are.
func BoundedBody(limit int64, log logr.Logger, next http.Handler) http.Handler {
	return boundedBody{limit: limit, log: log, next: next}
}

type boundedBody struct {
	limit int64
	log   logr.Logger
	next  http.Handler
}

func (b boundedBody) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > b.limit {
		b.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large (%d bytes): the limit is %d bytes", r.ContentLength, b.limit))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, b.limit))
	if err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			b.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large: the limit is %d bytes", b.limit))
			return
		}
		b.refuse(w, r, http.StatusBadRequest, "reading the request body: "+err.Error())
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	b.next.ServeHTTP(w, r)
}

// refuse answers code with reason as a plain-text body and closes the connection: the rest of
// an oversized body is never read.
func (b boundedBody) refuse(w http.ResponseWriter, r *http.Request, code int, reason string) {
	b.log.Info("Rejected webhook request", "path", r.URL.Path, "remote", r.RemoteAddr, "code", code, "reason", reason)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Connection", "close")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, reason+"\n") //nolint:gosec // G705: text/plain with nosniff, never rendered as HTML
}
