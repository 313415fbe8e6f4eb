// Package charts holds Scribe's Helm chart, scribe/. It has no Go code; its
// tests lint and render the chart with Helm's Go packages and check the
// result against config/ (the kustomize deployment).
package charts
