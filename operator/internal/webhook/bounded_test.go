package webhook

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingBody is a request body of size bytes that counts how many of them were read: a
// JSON document whose one string value is as long as it takes, so a JSON decoder keeps reading
// to the end instead of stopping at a syntax error.
type countingBody struct {
	size, read int64
}

const countingPrefix = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"`

func (c *countingBody) Read(p []byte) (int, error) {
	if c.read >= c.size {
		return 0, io.EOF
	}
	n := int64(len(p))
	if left := c.size - c.read; n > left {
		n = left
	}
	for i := range n {
		switch off := c.read + i; {
		case off < int64(len(countingPrefix)):
			p[i] = countingPrefix[off]
		case off >= c.size-3:
			p[i] = `"}}`[off-(c.size-3)]
		default:
			p[i] = 'a'
		}
	}
	c.read += n
	return int(n), nil
}

func TestConvertRefusesBodiesOverTheLimit(t *testing.T) {
	mux := servedMux(t)
	const huge = 64 << 20 // well past the 7 MiB limit; today's handler read all of it

	for _, tc := range []struct {
		name          string
		contentLength int64 // -1: chunked, no declared length
	}{
		{"declared Content-Length", huge},
		{"chunked, no Content-Length", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingBody{size: huge}
			req := httptest.NewRequest(http.MethodPost, ConversionPath, body)
			req.ContentLength = tc.contentLength
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			start := time.Now()
			mux.ServeHTTP(rec, req)

			answer := rec.Body.String()
			if len(answer) > 200 { // today's handler echoed the 64 MiB uid
				answer = answer[:200] + "…"
			}
			assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, "response: %s", answer)
			assert.Contains(t, answer, "the limit is "+strconv.FormatInt(MaxRequestBytes, 10)+" bytes")
			assert.LessOrEqual(t, body.read, MaxRequestBytes+1, "the handler read past the limit")
			assert.Less(t, time.Since(start), 5*time.Second)
		})
	}
}

func TestConvertServesBodiesUpToTheLimit(t *testing.T) {
	mux := servedMux(t)
	// A well-formed ConversionReview at exactly the limit reaches the conversion handler, which
	// answers it (a failure to convert the made-up object, inside a 200 ConversionReview).
	body := &countingBody{size: MaxRequestBytes}
	req := httptest.NewRequest(http.MethodPost, ConversionPath, body)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusOK, rec.Code, "response: %.300s", rec.Body.String())
	assert.Equal(t, MaxRequestBytes, body.read)
}

// The admission paths have enforced the same limit all along (controller-runtime's admission
// handler): /convert now matches them.
func TestAdmissionPathsShareTheLimit(t *testing.T) {
	mux := servedMux(t)
	over := bytes.Repeat([]byte{' '}, int(MaxRequestBytes)+1)
	_, out := post(t, mux, "/validate-nvidia-com-v1alpha1-dynamographdeployment", over)
	require.NotNil(t, out.Response)
	require.NotNil(t, out.Response.Result)
	assert.EqualValues(t, http.StatusRequestEntityTooLarge, out.Response.Result.Code)
	assert.True(t, strings.HasSuffix(out.Response.Result.Message, "limit is "+strconv.FormatInt(MaxRequestBytes, 10)+" bytes"), out.Response.Result.Message)
}
