package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/egress"
	"github.com/scribe-gitops/scribe/internal/textcut"
)

// A check's address, query and Secret are written by whoever writes the
// Workload, and the answer comes from a server they choose. So: an
// address must be an http(s) URL (no user info; a provider's base URL has
// no query or fragment either, which would turn the API path into
// something else); the controller connects only where the platform's
// egress policy allows (internal/egress: never a link-local address, a
// cloud's metadata service or the environment's proxy unless the platform
// opts in; loopback and private ranges only when the platform allows
// them) and follows no redirect; credentials come only from a Secret
// bound to the URL (CheckBound); an answer is read up to maxQueryAnswer
// bytes and queryTimeout, and every credential value the request carried
// is cut out of it before anything reads it; and text from the server
// reaches status only as a short, quoted excerpt.
const (
	maxQueryAnswer = 4 << 20
	queryTimeout   = 10 * time.Second
	// maxRoundTime bounds a whole analysis round, whatever the number of
	// checks and template metrics.
	maxRoundTime = 30 * time.Second
	// maxRemoteText is the most bytes of a server's own words kept in a
	// check's message; maxCheckMessage bounds the whole message.
	maxRemoteText   = 200
	maxCheckMessage = 1024
	// headerKeyPrefix marks the Secret keys sent as headers.
	headerKeyPrefix = "header."
)

// ValidatePrometheusAddress says why address cannot be a check's base
// URL (Prometheus, Datadog, New Relic), or nil. The CRD enforces the same
// rule; this one also guards objects stored before it.
func ValidatePrometheusAddress(address string) error {
	return validateCheckURL(address, false)
}

// validateCheckURL says why raw cannot be a check's URL; withQuery allows
// a query (a web check's endpoint).
func validateCheckURL(raw string, withQuery bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %s", remoteText(err.Error()))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must be an http or https URL")
	case u.Host == "" || u.Opaque != "":
		return errors.New("must name a host")
	case u.User != nil:
		return errors.New("must not carry user info; credentials belong in the check's secretRef")
	case !withQuery && (u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "?")):
		return errors.New("must not have a query: it is the provider's base URL, the API path is appended")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return errors.New("must not have a fragment")
	}
	return nil
}

// NewAnalysisHTTPClient is the HTTP client analysis queries and webhooks
// go through: connections only where policy allows, no redirects, a
// bounded time.
func NewAnalysisHTTPClient(policy egress.Policy) *http.Client {
	tr := policy.Transport()
	tr.ResponseHeaderTimeout = queryTimeout
	return &http.Client{
		Transport: tr,
		Timeout:   queryTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// endpoint is how one check talks to its provider: an HTTP client whose
// answers are bounded and whose requests carry the Secret's headers, and
// the Secret's data for the provider's own keys.
type endpoint struct {
	client *http.Client
	secret map[string][]byte
	// sent are the credential values the requests carry, cut out of
	// every answer (redact).
	sent []string
}

// endpoint prepares the client for check i of w, which talks to target
// (its base URL or web URL). The check's Secret, when it names one, must
// be bound to target.
func (c *Checker) endpoint(ctx context.Context, w *scribev1.Workload, p probe, target string) (*endpoint, error) {
	ch := p.check
	hc := c.HTTP
	if hc == nil {
		hc = NewAnalysisHTTPClient(c.Egress)
	}
	client := *hc
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	e := &endpoint{}
	header := p.header.Clone()
	if header == nil {
		header = http.Header{}
	}
	var ca []byte
	if ch.SecretRef != nil {
		field := p.field + ".secretRef"
		if c.Secrets == nil {
			return nil, fmt.Errorf("%s: this controller reads no Secrets for analysis", field)
		}
		data, err := c.Secrets(ctx, w.Namespace, ch.SecretRef.Name, target, field)
		if err != nil {
			return nil, err
		}
		e.secret = data
		for k, v := range data {
			if name, ok := strings.CutPrefix(k, headerKeyPrefix); ok {
				header.Set(name, strings.TrimSpace(string(v)))
				e.sent = append(e.sent, strings.TrimSpace(string(v)))
			}
		}
		switch {
		case len(data["token"]) > 0:
			token := strings.TrimSpace(string(data["token"]))
			header.Set("Authorization", "Bearer "+token)
			e.sent = append(e.sent, token, "Bearer "+token)
		case len(data["username"]) > 0:
			r := &http.Request{Header: http.Header{}}
			r.SetBasicAuth(string(data["username"]), string(data["password"]))
			header.Set("Authorization", r.Header.Get("Authorization"))
			basic := r.Header.Get("Authorization")
			e.sent = append(e.sent, string(data["password"]), basic, strings.TrimPrefix(basic, "Basic "))
		}
		ca = data["ca.crt"]
	}
	if len(ca) > 0 || ch.InsecureSkipVerify {
		t, ok := next.(*http.Transport)
		if !ok {
			return nil, errors.New("this controller's HTTP client takes no TLS options")
		}
		// A transport of this check's own, made per round: no idle
		// connections are kept that nothing would close.
		t = t.Clone()
		t.DisableKeepAlives = true
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: ch.InsecureSkipVerify} //nolint:gosec // the Workload asks for it, and the field says so
		if len(ca) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(ca) {
				return nil, fmt.Errorf("%s.secretRef: ca.crt holds no PEM certificate", p.field)
			}
			cfg.RootCAs = pool
		}
		t.TLSClientConfig = cfg
		next = t
	}
	client.Transport = checkTransport{next: next, header: header}
	e.client = &client
	return e, nil
}

// do sends req and returns the body of a 2xx answer.
func (e *endpoint) do(ctx context.Context, req *http.Request) ([]byte, error) {
	return e.doWithin(ctx, req, queryTimeout)
}

// doWithin is do with its own timeout.
func (e *endpoint) doWithin(ctx context.Context, req *http.Request, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Every header value the request carries counts as a credential (a
	// provider's own key headers, such as Datadog's and New Relic's, and
	// a template's literal headers, besides the Secret's), but those that
	// carry none.
	e = &endpoint{client: e.client, secret: e.secret, sent: append(slices.Clone(e.sent), headerValues(req.Header)...)}
	resp, err := e.client.Do(req.WithContext(ctx))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer within %s, or the round's time is up", timeout)
		}
		return nil, errors.New(remoteText(e.redact(redactURLError(err))))
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, errors.New(e.redact(err.Error()))
	}
	// Whatever reads the answer next (a parser, a JSONPath, a message)
	// sees no credential the request carried, even when the server echoes
	// its headers back.
	body = []byte(e.redact(string(body)))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("the server answered %s: %s", e.redact(resp.Status), remoteText(string(body)))
	}
	return body, nil
}

// plainHeader says header k carries no credential: its values are not
// cut out of answers.
func plainHeader(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Accept", "Accept-Encoding", "Content-Type", "Content-Length", "User-Agent":
		return true
	}
	return false
}

// headerValues are the values of h's headers but the plain ones.
func headerValues(h http.Header) []string {
	var out []string
	for k, vs := range h {
		if plainHeader(k) {
			continue
		}
		for _, v := range vs {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}

// minRedacted is the shortest credential value looked for in answers: a
// shorter one protects nothing, and cutting it out would garble ordinary
// text (a number, a word).
const minRedacted = 4

// redacted stands for a credential value cut out of an answer.
const redacted = "[redacted]"

// redact is s without any credential value e's requests carried, as sent
// or as it reads inside a JSON string.
func (e *endpoint) redact(s string) string {
	return redactValues(s, e.sent)
}

// redactValues replaces each of values (of at least minRedacted bytes),
// and its JSON-escaped form, in s, longest first.
func redactValues(s string, values []string) string {
	var forms []string
	for _, v := range values {
		if len(v) < minRedacted {
			continue
		}
		forms = append(forms, v)
		for _, html := range []bool{true, false} {
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(html)
			if enc.Encode(v) == nil {
				if q := strings.TrimSuffix(b.String(), "\n"); len(q) >= 2 && q[1:len(q)-1] != v {
					forms = append(forms, q[1:len(q)-1])
				}
			}
		}
	}
	sort.Slice(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	for _, f := range forms {
		s = strings.ReplaceAll(s, f, redacted)
	}
	return s
}

// redactURLError is err's text without the URL's query (it may hold a
// key some providers take there).
func redactURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		u, perr := url.Parse(ue.URL)
		if perr == nil {
			u.RawQuery = ""
			return ue.Op + " " + u.String() + ": " + ue.Err.Error()
		}
	}
	return err.Error()
}

// checkTransport adds the check's headers to every request and bounds
// every answer.
type checkTransport struct {
	next   http.RoundTripper
	header http.Header
}

func (t checkTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.header) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.header {
			r.Header[k] = v
		}
	}
	resp, err := t.next.RoundTrip(r)
	if err == nil {
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: maxQueryAnswer}
	}
	return resp, err
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
