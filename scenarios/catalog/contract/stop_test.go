package contract

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The server must be reading a review's body during its pause, or W13 would test only
// kept-alive connections between requests.
func TestPostPausedPutsHalfTheBodyOnTheWireBeforeItsPause(t *testing.T) {
	var mu sync.Mutex
	var begun, read time.Time
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = r.Body.Read(make([]byte, 1))
		mu.Lock()
		begun = time.Now()
		mu.Unlock()
		_, _ = io.ReadAll(r.Body)
		mu.Lock()
		read = time.Now()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u","allowed":true}}`)
	}))
	srv.StartTLS()
	defer srv.Close()
	cfg := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	client := keptAlive(func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", srv.Listener.Addr().String())
	}, cfg)
	review := &admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: types.UID("u")}}

	resp, closed, err := postPaused(context.Background(), client, srv.URL+"/validate", review)
	require.NoError(t, err)
	assert.True(t, resp.Allowed)
	assert.False(t, closed, "the server kept the connection alive")
	mu.Lock()
	defer mu.Unlock()
	assert.GreaterOrEqual(t, read.Sub(begun), stopPause*8/10, "the server read the body's first byte %s before its end; expected at least the pause", read.Sub(begun))
}

func TestFirstOfCutsAndCounts(t *testing.T) {
	assert.Equal(t, []string{"a", "b", "… and 1 more"}, firstOf([]string{"a", "b", "c"}, 2))
	assert.Equal(t, []string{"a"}, firstOf([]string{"a"}, 2))
}
