// Package rawhttp writes HTTP/1.1 requests byte by byte on a connection the caller opens — a
// provider's dial, with TLS or without — and reads the answer with bounds. net/http's client
// refuses to send what a hostile client sends (a Content-Length its body does not keep, headers
// that never end, a method that is no token), and it hides what such a client must see: how long
// the server took, whether it answered at all, and whether it closed the connection after. A
// Request says what goes on the wire, whatever it claims; an Answer is what came back: the
// status, the headers, the start of the body, the time taken, the error when nothing came, and
// whether the server closed the connection.
package rawhttp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Request is one HTTP/1.1 request as written on the wire, whatever it claims.
type Request struct {
	Method, Path string
	// ContentType is the Content-Type header; "" sends none.
	ContentType string
	// Headers are more header lines, each ending in CRLF.
	Headers string
	// Body writes the body (nil: no body). With Chunked it is chunk-encoded as it is written.
	Body func(io.Writer) error
	// Length is the declared Content-Length; -1 sends none.
	Length  int64
	Chunked bool
	// SlowHeaders, when not 0, makes a slowloris client: the request line and Host, then a
	// header line every SlowHeaders, never ending the headers (everything else is ignored).
	SlowHeaders time.Duration
	// What names the request in messages: "a truncated AdmissionReview".
	What string
}

// Answer is what a client saw.
type Answer struct {
	Status int
	Header http.Header
	// Body is the start of the answer's body (at most AnswerPrefix bytes).
	Body string
	// Took is the time from the first byte sent to the status line (or to err).
	Took time.Duration
	// Err is why there was no answer: the connection closed, reset, or the wait ended.
	Err error
	// Closed says the server closed the connection after answering.
	Closed bool
}

// AnswerPrefix is how much of an answer's body is read: enough for any message.
const AnswerPrefix = 64 << 10

// String says what came back for a message: the status, the time and the start of the body,
// or why nothing came.
func (a Answer) String() string {
	if a.Err != nil {
		return fmt.Sprintf("no answer after %s: %v", a.Took.Round(10*time.Millisecond), a.Err)
	}
	return fmt.Sprintf("HTTP %d after %s: %q", a.Status, a.Took.Round(10*time.Millisecond), short(a.Body, 160))
}

func short(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Exchange writes req on conn while reading the answer, as a streaming client does (the
// server may answer before the body is all sent), and waits at most wait for it. It closes
// conn.
func Exchange(ctx context.Context, conn net.Conn, req Request, wait time.Duration) Answer {
	defer func() { _ = conn.Close() }()
	start := time.Now()
	_ = conn.SetDeadline(start.Add(wait))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()

	var wg sync.WaitGroup
	wg.Go(func() { _ = WriteRequest(conn, req) })
	defer wg.Wait() // the writer ends once conn is closed (deferred first)

	a := ReadAnswer(conn, bufio.NewReader(conn), start, wait)
	_ = conn.Close()
	return a
}

// ReadAnswer reads the response to a request begun at start from br, conn's reader, waiting
// at most wait (for the message); when the response says the server closes the connection, it
// checks that it does.
func ReadAnswer(conn net.Conn, br *bufio.Reader, start time.Time, wait time.Duration) Answer {
	resp, err := finalResponse(br)
	a := Answer{Took: time.Since(start)}
	if err != nil {
		a.Err = describeReadError(err, wait)
		return a
	}
	a.Status, a.Header = resp.StatusCode, resp.Header
	b, _ := io.ReadAll(io.LimitReader(resp.Body, AnswerPrefix))
	a.Body = string(b)
	if resp.Close && int64(len(b)) < AnswerPrefix {
		// The server said it closes the connection: check it does — the next read ends at
		// once, with nothing (EOF or a reset), rather than waiting for another response.
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, rerr := br.ReadByte()
		a.Closed = rerr != nil && !IsTimeout(rerr)
	}
	return a
}

// finalResponse reads a response, skipping interim (1xx) ones as every HTTP/1.1 client must
// (RFC 9110, 15.2): a draining server may write `100 Continue` onto an idle connection to ask
// its client to close it (gauntlet's operator does).
func finalResponse(br *bufio.Reader) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, err
		}
		_ = resp.Body.Close()
	}
}

// WriteRequest writes req's head and body. A request with SlowHeaders writes until w fails.
func WriteRequest(w io.Writer, req Request) error {
	var head strings.Builder
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: webhook\r\nUser-Agent: gauntlet-hostile\r\n", req.Method, req.Path)
	if req.SlowHeaders > 0 {
		if _, err := io.WriteString(w, head.String()); err != nil {
			return err
		}
		for i := 0; ; i++ {
			time.Sleep(req.SlowHeaders)
			if _, err := fmt.Fprintf(w, "X-Slow-%d: x\r\n", i); err != nil {
				return err
			}
		}
	}
	if req.ContentType != "" {
		fmt.Fprintf(&head, "Content-Type: %s\r\n", req.ContentType)
	}
	head.WriteString(req.Headers)
	if req.Length >= 0 {
		fmt.Fprintf(&head, "Content-Length: %d\r\n", req.Length)
	}
	if req.Chunked {
		head.WriteString("Transfer-Encoding: chunked\r\n")
	}
	head.WriteString("\r\n")
	if _, err := io.WriteString(w, head.String()); err != nil {
		return err
	}
	if req.Body == nil {
		return nil
	}
	if !req.Chunked {
		return req.Body(w)
	}
	cw := httputil.NewChunkedWriter(w)
	if err := req.Body(cw); err != nil {
		return err
	}
	if err := cw.Close(); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\r\n")
	return err
}

func describeReadError(err error, wait time.Duration) error {
	switch {
	case IsTimeout(err):
		return fmt.Errorf("still waiting after %s", wait)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the server closed the connection without an answer")
	}
	return err
}

// IsTimeout says err is a deadline passing (a net.Error that timed out).
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Bytes writes b.
func Bytes(b []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(b); return err }
}

// Send builds a request with a body of b, declared by its length.
func Send(method, path, contentType string, b []byte, what string) Request {
	return Request{Method: method, Path: path, ContentType: contentType, Body: Bytes(b), Length: int64(len(b)), What: what}
}

// Streamed writes prefix, then filler bytes up to size in all, then suffix — a JSON
// document of size bytes whose one string value is as long as it takes, so that a decoder
// keeps reading to its end. Nothing of it is held in memory but a 64 KiB block.
func Streamed(size int64, prefix, suffix string) func(io.Writer) error {
	return func(w io.Writer) error {
		if _, err := io.WriteString(w, prefix); err != nil {
			return err
		}
		block := []byte(strings.Repeat("a", 64<<10))
		left := size - int64(len(prefix)) - int64(len(suffix))
		for left > 0 {
			n := min(left, int64(len(block)))
			if _, err := w.Write(block[:n]); err != nil {
				return err
			}
			left -= n
		}
		_, err := io.WriteString(w, suffix)
		return err
	}
}

// SizeName is "100 MB" for messages.
func SizeName(n int64) string {
	if n >= 1<<20 {
		return strconv.FormatInt(n>>20, 10) + " MB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
