package ocisink

import (
	"net/http"
	"strings"
	"testing"
)

// TestPlainHTTPGoesOnlyToLoopbackRegistries: go-containerregistry falls
// back to plain HTTP on its own for a registry at a private IP literal or
// a .local name; without Insecure the sink's transport refuses that, so a
// registry credential never travels in the clear but to loopback
// (127.0.0.1.attacker.example is no loopback).
func TestPlainHTTPGoesOnlyToLoopbackRegistries(t *testing.T) {
	reached := 0
	tr := httpsOnly{next: roundTripFunc(func(*http.Request) (*http.Response, error) {
		reached++
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	})}
	for _, tc := range []struct {
		url     string
		allowed bool
	}{
		{"https://10.0.0.5/v2/", true},
		{"http://10.0.0.5/v2/", false},
		{"http://192.168.1.20:5000/v2/", false},
		{"http://registry.local/v2/", false},
		{"http://127.0.0.1.attacker.example/v2/", false},
		{"http://localhost.attacker.example:5000/v2/", false},
		{"http://127.0.0.1:5000/v2/", true},
		{"http://[::1]:5000/v2/", true},
		{"http://localhost:5000/v2/", true},
	} {
		t.Run(tc.url, func(t *testing.T) {
			before := reached
			req, err := http.NewRequest(http.MethodGet, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				_ = resp.Body.Close()
			}
			switch {
			case tc.allowed && (err != nil || reached == before):
				t.Errorf("refused: %v", err)
			case !tc.allowed && (err == nil || reached != before || !strings.Contains(err.Error(), "plain HTTP")):
				t.Errorf("sent in the clear (err %v)", err)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
