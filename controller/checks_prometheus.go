package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/textcut"
)

// A check's address and query are written by whoever writes the Workload,
// and the answer comes from a server they choose. So: the address must be
// an http(s) base URL (no user info, query or fragment, which would turn
// the API path into something else); the controller never dials a
// link-local address (a cloud's metadata service) nor follows a redirect;
// an answer is read up to maxQueryAnswer bytes and queryTimeout; and text
// from the server reaches status only as a short, quoted excerpt.
const (
	maxQueryAnswer = 4 << 20
	queryTimeout   = 10 * time.Second
	// maxRemoteText is the most bytes of a server's own words kept in a
	// check's message; maxCheckMessage bounds the whole message.
	maxRemoteText   = 200
	maxCheckMessage = 1024
)

// ValidatePrometheusAddress says why address cannot be a check's
// Prometheus address, or nil. The CRD enforces the same rule; this one
// also guards objects stored before it.
func ValidatePrometheusAddress(address string) error {
	u, err := url.Parse(address)
	if err != nil {
		return fmt.Errorf("address is not a URL: %s", remoteText(err.Error()))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("address must be an http or https URL")
	case u.Host == "" || u.Opaque != "":
		return errors.New("address must name a host")
	case u.User != nil:
		return errors.New("address must not carry user info; credentials do not belong in a Workload")
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(address, "?"):
		return errors.New("address must not have a query: it is the server's base URL, /api/v1/query is appended")
	case u.Fragment != "" || strings.Contains(address, "#"):
		return errors.New("address must not have a fragment")
	}
	return nil
}

// NewAnalysisHTTPClient is the HTTP client analysis queries go through:
// no redirects, no link-local destinations, a bounded time.
func NewAnalysisHTTPClient() *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: refuseLinkLocal}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		MaxIdleConns:          32,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: queryTimeout,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   queryTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// refuseLinkLocal stops a connection to a link-local address (169.254/16,
// fe80::/10), whatever name resolved to it.
func refuseLinkLocal(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip != nil && (ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()) {
		return fmt.Errorf("%s is link-local: analysis never queries it", host)
	}
	return nil
}

// boundedBody fails a read past its limit instead of cutting the answer
// short silently.
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		if n, _ := b.ReadCloser.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("the answer is larger than %d MiB", maxQueryAnswer>>20)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

type boundedTransport struct{ next http.RoundTripper }

func (t boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil {
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: maxQueryAnswer}
	}
	return resp, err
}

// prometheus runs an instant query through Prometheus's own API client and
// checks that the first sample lies within [min, max].
func (c *Checker) prometheus(ctx context.Context, ch scribev1.Check) (bool, string, error) {
	if ch.Address == "" || ch.Query == "" {
		return false, "", errors.New("a prometheus check needs address and query")
	}
	if err := ValidatePrometheusAddress(ch.Address); err != nil {
		return false, "", err
	}
	hc := c.HTTP
	if hc == nil {
		hc = NewAnalysisHTTPClient()
	}
	bounded := *hc
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	bounded.Transport = boundedTransport{next: next}
	api, err := promapi.NewClient(promapi.Config{Address: ch.Address, Client: &bounded})
	if err != nil {
		return false, "", fmt.Errorf("address: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	val, _, err := promv1.NewAPI(api).Query(ctx, ch.Query, time.Time{})
	if err != nil {
		return false, "", fmt.Errorf("query %s: %s", ch.Address, queryError(err))
	}
	v, ok := firstSample(val)
	if !ok {
		return false, "", fmt.Errorf("query %q returned no sample", ch.Query)
	}
	if ch.Min != "" {
		if m, err := strconv.ParseFloat(ch.Min, 64); err != nil {
			return false, "", fmt.Errorf("min %q: %w", ch.Min, err)
		} else if v < m {
			return false, fmt.Sprintf("%s = %g, below %g", ch.Query, v, m), nil
		}
	}
	if ch.Max != "" {
		if m, err := strconv.ParseFloat(ch.Max, 64); err != nil {
			return false, "", fmt.Errorf("max %q: %w", ch.Max, err)
		} else if v > m {
			return false, fmt.Sprintf("%s = %g, above %g", ch.Query, v, m), nil
		}
	}
	return true, fmt.Sprintf("%s = %g", ch.Query, v), nil
}

// firstSample is the value of a scalar, or of a vector's first sample.
func firstSample(v model.Value) (float64, bool) {
	switch r := v.(type) {
	case *model.Scalar:
		return float64(r.Value), true
	case model.Vector:
		if len(r) > 0 {
			return float64(r[0].Value), true
		}
	}
	return 0, false
}

// queryError says what went wrong with a query; the server's own words
// (an error field, a status text) only as a quoted excerpt.
func queryError(err error) string {
	var apiErr *promv1.Error
	if errors.As(err, &apiErr) {
		return fmt.Sprintf("%s: %s", apiErr.Type, remoteText(apiErr.Msg))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", queryTimeout)
	}
	return remoteText(err.Error())
}

// remoteText is at most maxRemoteText bytes of s, quoted so that no
// newline, control character or markup passes as Scribe's own text.
func remoteText(s string) string {
	return strconv.Quote(textcut.Ellipsis(s, maxRemoteText))
}

// boundMessage keeps a check's message to maxCheckMessage bytes on one line.
func boundMessage(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	return textcut.Ellipsis(s, maxCheckMessage)
}
