// Package charts holds Scribe's Helm chart, scribe/. It has no Go code; its
// tests run the helm CLI (hack/build-helm.sh builds it into the cache; Helm
// is not in go.mod) to lint and render the chart, check the result against
// config/ (the kustomize deployment), and, with KUBEBUILDER_ASSETS, apply,
// install, upgrade and uninstall it against a real kube-apiserver.
package charts
