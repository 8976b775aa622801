package hostile

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

// request is one HTTP/1.1 request as written on the wire, whatever it claims.
type request struct {
	method, path string
	// contentType is the Content-Type header; "" sends none.
	contentType string
	// headers are more header lines, each ending in CRLF.
	headers string
	// body writes the body (nil: no body). With chunked it is chunk-encoded as it is written.
	body func(io.Writer) error
	// length is the declared Content-Length; -1 sends none.
	length  int64
	chunked bool
	// slowHeaders sends the request line and Host, then a header line every slowHeaderEvery,
	// never ending the headers (everything else is ignored).
	slowHeaders bool
	// what names the request in messages: "a truncated AdmissionReview".
	what string
}

// answer is what a client saw.
type answer struct {
	status int
	header http.Header
	// body is the start of the answer's body (at most answerPrefix bytes).
	body string
	// took is the time from the first byte sent to the status line (or to err).
	took time.Duration
	// err is why there was no answer: the connection closed, reset, or the wait ended.
	err error
	// closed says the server closed the connection after answering.
	closed bool
}

// answerPrefix is how much of an answer's body is read: enough for any message.
const answerPrefix = 64 << 10

func (a answer) String() string {
	if a.err != nil {
		return fmt.Sprintf("no answer after %s: %v", a.took.Round(10*time.Millisecond), a.err)
	}
	return fmt.Sprintf("HTTP %d after %s: %q", a.status, a.took.Round(10*time.Millisecond), short(a.body, 160))
}

func short(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// exchange writes req on conn while reading the answer, as a streaming client does (the
// server may answer before the body is all sent), and waits at most wait for it. It closes
// conn.
func exchange(ctx context.Context, conn net.Conn, req request, wait time.Duration) answer {
	defer func() { _ = conn.Close() }()
	start := time.Now()
	_ = conn.SetDeadline(start.Add(wait))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()

	var wg sync.WaitGroup
	wg.Go(func() { _ = writeRequest(conn, req) })
	defer wg.Wait() // the writer ends once conn is closed (deferred first)

	a := readAnswer(conn, bufio.NewReader(conn), start, wait)
	_ = conn.Close()
	return a
}

// readAnswer reads the response to a request begun at start from br, conn's reader, waiting
// at most wait (for the message); when the response says the server closes the connection, it
// checks that it does.
func readAnswer(conn net.Conn, br *bufio.Reader, start time.Time, wait time.Duration) answer {
	resp, err := finalResponse(br)
	a := answer{took: time.Since(start)}
	if err != nil {
		a.err = describeReadError(err, wait)
		return a
	}
	a.status, a.header = resp.StatusCode, resp.Header
	b, _ := io.ReadAll(io.LimitReader(resp.Body, answerPrefix))
	a.body = string(b)
	if resp.Close && int64(len(b)) < answerPrefix {
		// The server said it closes the connection: check it does — the next read ends at
		// once, with nothing (EOF or a reset), rather than waiting for another response.
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, rerr := br.ReadByte()
		a.closed = rerr != nil && !isTimeout(rerr)
	}
	return a
}

// finalResponse reads a response, skipping interim (1xx) ones as every HTTP/1.1 client must
// (RFC 9110, 15.2): the operator's draining server writes `100 Continue` onto an idle
// connection to ask its client to close it.
func finalResponse(br *bufio.Reader) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, err
		}
		_ = resp.Body.Close()
	}
}

// writeRequest writes req's head and body.
func writeRequest(w io.Writer, req request) error {
	var head strings.Builder
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: webhook\r\nUser-Agent: gauntlet-hostile\r\n", req.method, req.path)
	if req.slowHeaders {
		if _, err := io.WriteString(w, head.String()); err != nil {
			return err
		}
		for i := 0; ; i++ {
			time.Sleep(slowHeaderEvery)
			if _, err := fmt.Fprintf(w, "X-Slow-%d: x\r\n", i); err != nil {
				return err
			}
		}
	}
	if req.contentType != "" {
		fmt.Fprintf(&head, "Content-Type: %s\r\n", req.contentType)
	}
	head.WriteString(req.headers)
	if req.length >= 0 {
		fmt.Fprintf(&head, "Content-Length: %d\r\n", req.length)
	}
	if req.chunked {
		head.WriteString("Transfer-Encoding: chunked\r\n")
	}
	head.WriteString("\r\n")
	if _, err := io.WriteString(w, head.String()); err != nil {
		return err
	}
	if req.body == nil {
		return nil
	}
	if !req.chunked {
		return req.body(w)
	}
	cw := httputil.NewChunkedWriter(w)
	if err := req.body(cw); err != nil {
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
	case isTimeout(err):
		return fmt.Errorf("still waiting after %s", wait)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the server closed the connection without an answer")
	}
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// bytesBody writes b.
func bytesBody(b []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(b); return err }
}

// send builds a request with a body of b, declared by its length.
func send(method, path, contentType string, b []byte, what string) request {
	return request{method: method, path: path, contentType: contentType, body: bytesBody(b), length: int64(len(b)), what: what}
}

// streamedBody writes prefix, then filler bytes up to size in all, then suffix — a JSON
// document of size bytes whose one string value is as long as it takes, so that a decoder
// keeps reading to its end. Nothing of it is held in memory but a 64 KiB block.
func streamedBody(size int64, prefix, suffix string) func(io.Writer) error {
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

// sizeName is "100 MB" for messages.
func sizeName(n int64) string {
	if n >= 1<<20 {
		return strconv.FormatInt(n>>20, 10) + " MB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
