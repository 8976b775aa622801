package rawhttp

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// received is what the test server saw of one request.
type received struct {
	contentLength int64
	chunked       bool
	bodyBytes     int64
}

// server is a TLS server on 127.0.0.1 that reads each request's body whole and answers 200
// with how many bytes it read; it reports what it saw on the returned channel.
func server(t *testing.T, handler http.HandlerFunc) (*httptest.Server, chan received) {
	t.Helper()
	seen := make(chan received, 1)
	if handler == nil {
		handler = func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, r.Body)
			seen <- received{contentLength: r.ContentLength, chunked: len(r.TransferEncoding) > 0 && r.TransferEncoding[0] == "chunked", bodyBytes: n}
			_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
		}
	}
	s := httptest.NewUnstartedServer(handler)
	s.Listener = must(net.Listen("tcp", "127.0.0.1:0"))
	s.StartTLS()
	t.Cleanup(s.Close)
	return s, seen
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// dial opens a TLS connection to s that trusts its certificate.
func dial(t *testing.T, s *httptest.Server) net.Conn {
	t.Helper()
	conn, err := tls.Dial("tcp", s.Listener.Addr().String(), s.Client().Transport.(*http.Transport).TLSClientConfig)
	require.NoError(t, err)
	return conn
}

const size = 3<<20 + 17 // more than one of Streamed's blocks, not a multiple of one

func TestExchangeSendsADeclaredLengthBodyAsDeclared(t *testing.T) {
	s, seen := server(t, nil)
	req := Request{Method: http.MethodPost, Path: "/v", ContentType: "application/json", Length: size, Body: Streamed(size, `{"a":"`, `"}`)}

	a := Exchange(context.Background(), dial(t, s), req, 10*time.Second)

	require.NoError(t, a.Err)
	assert.Equal(t, http.StatusOK, a.Status)
	assert.Equal(t, received{contentLength: size, bodyBytes: size}, <-seen)
}

func TestExchangeSendsAChunkedBodyChunked(t *testing.T) {
	s, seen := server(t, nil)
	req := Request{Method: http.MethodPost, Path: "/v", ContentType: "application/json", Length: -1, Chunked: true, Body: Streamed(size, `{"a":"`, `"}`)}

	a := Exchange(context.Background(), dial(t, s), req, 10*time.Second)

	require.NoError(t, a.Err)
	assert.Equal(t, strconv.Itoa(size), a.Body)
	assert.Equal(t, received{contentLength: -1, chunked: true, bodyBytes: size}, <-seen)
}

func TestExchangeReportsTheServerClosingAfterItsAnswer(t *testing.T) {
	s, _ := server(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		http.Error(w, "no", http.StatusMethodNotAllowed)
	})

	a := Exchange(context.Background(), dial(t, s), Request{Method: http.MethodGet, Path: "/v", Length: -1}, 10*time.Second)

	require.NoError(t, a.Err)
	assert.Equal(t, http.StatusMethodNotAllowed, a.Status)
	assert.True(t, a.Closed, "the server closed the connection after its answer")
}

func TestExchangeReportsAConnectionLeftOpenAsNotClosed(t *testing.T) {
	s, _ := server(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })

	a := Exchange(context.Background(), dial(t, s), Request{Method: http.MethodGet, Path: "/v", Length: -1}, 10*time.Second)

	require.NoError(t, a.Err)
	assert.False(t, a.Closed, "a kept-alive connection is not reported closed")
}

func TestExchangeSaysWhenTheServerClosesWithoutAnAnswer(t *testing.T) {
	s, _ := server(t, func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})

	a := Exchange(context.Background(), dial(t, s), Request{Method: http.MethodGet, Path: "/v", Length: -1}, 10*time.Second)

	require.Error(t, a.Err)
	assert.Contains(t, a.Err.Error(), "closed the connection without an answer")
}

func TestExchangeStopsWaitingAfterWait(t *testing.T) {
	s, _ := server(t, nil)
	req := Request{Method: http.MethodPost, Path: "/v", Length: -1, SlowHeaders: 50 * time.Millisecond}

	a := Exchange(context.Background(), dial(t, s), req, 300*time.Millisecond)

	require.Error(t, a.Err)
	assert.Contains(t, a.Err.Error(), "still waiting after 300ms")
	assert.Less(t, a.Took, 2*time.Second)
}

// An interim response (what gauntlet's draining operator writes onto an idle connection) is not
// the answer: the final one after it is.
func TestExchangeSkipsInterimResponses(t *testing.T) {
	s, _ := server(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusContinue)
		w.WriteHeader(http.StatusEarlyHints)
		_, _ = io.WriteString(w, "final")
	})

	a := Exchange(context.Background(), dial(t, s), Request{Method: http.MethodGet, Path: "/v", Length: -1}, 10*time.Second)

	require.NoError(t, a.Err)
	assert.Equal(t, http.StatusOK, a.Status)
	assert.Equal(t, "final", a.Body)
}
