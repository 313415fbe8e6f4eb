# Scribe — see README.md. `make demo` and `make test` are the two commands.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/scribe
TOOLS_DIR := $(CACHE_DIR)/tools

CONTROLLER_GEN_VERSION ?= v0.21.0
CUE_VERSION ?= v0.17.1
GOLANGCI_LINT_VERSION ?= v2.15.0

CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen-$(CONTROLLER_GEN_VERSION)/controller-gen
CUE := $(TOOLS_DIR)/cue-$(CUE_VERSION)/cue
GOLANGCI_LINT := $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint

GO_TEST_FLAGS ?= -count=1
# How many inputs `make test` runs each fuzz target for (about 10-20 s each
# on 2 cores). A count, not a duration: Go 1.26's fuzz coordinator can fail a
# duration-bound run with "context deadline exceeded" when the deadline
# fires while a worker is busy (golang/go#75804, fixed in Go 1.27), which
# failed CI with no failing input. FUZZ_MINIMIZE bounds the minimisation of
# each new interesting input (Go's default, 60 s, stalled a 15 s run).
FUZZ_RENDER_EXECS ?= 2000x
FUZZ_FIELDS_EXECS ?= 2000x
FUZZ_SPLIT_EXECS ?= 200000x
FUZZ_COMMIT_EXECS ?= 20000x
FUZZ_MINIMIZE ?= 100x
# make demo APPLIER=argocd walks the demo through Argo CD instead of Flux.
APPLIER ?= flux
# The applier the end-to-end scenarios run through: empty runs each scenario
# once through Flux and once through Argo CD (its /Flux and /ArgoCD
# subtests); `flux` or `argocd` runs one.
E2E_APPLIERS ?=
# How many end-to-end loops (each its own control plane, applier and git
# server, about 1-2 GiB) run at once: the scenarios mostly wait on the
# appliers, so they overlap well on two cores.
E2E_PARALLEL ?= 3

# Upstream CRDs (tests, schemas; internal/crds): the repository carries those
# of the projects the Go module proxy does not serve (internal/crds/upstream),
# so a clone runs every test on its own; the others come from the pinned
# modules through the proxy. SCRIBE_CRDS_DIR, an offline mirror with one
# folder per project (../shared/crds beside the repository when it exists),
# is optional: it serves the proxy's projects without the network, a test
# checks that it holds the same bytes as the repository's copies, and
# `make refresh-crds` copies from it.
REPO_ROOT := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
SCRIBE_CRDS_DIR ?= $(abspath $(wildcard $(REPO_ROOT)/../shared/crds))

.PHONY: all
all: build

##@ Main commands

.PHONY: demo
demo: node-packages ## Boot the local loop (control plane, a real node, kwok, Flux, git server, Argo Workflows) and a second cluster with its own real node, install Scribe from its image by its chart, walk a canary of the demo app and the Experiment of fixtures/demo across the two clusters (app target a gke cluster on the second cluster, a hub target depending on it, the validation workflow on the hub probing the app's address; the loop plays only Cluster API's status and kubeconfig Secret and the cloud's load-balancer controller), print a summary with the stage timings, stop. APPLIER=argocd walks them through Argo CD.
	@echo "make demo: the first run builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kwok, the Flux controllers, the Argo Workflows workflow-controller and helm, and with APPLIER=argocd Argo CD, kustomize and a Redis server (cached afterwards); it needs root for the real nodes"
	SCRIBE_E2E=1 SCRIBE_DEMO=1 SCRIBE_DEMO_APPLIER=$(APPLIER) go test -count=1 -v -timeout 90m -run '^TestDemo$$' ./test/e2e/

.PHONY: demo-up
demo-up: node-packages ## Like demo, then leave the loop running (prints a kubeconfig for each cluster); Ctrl-C or `make demo-down` stops everything.
	SCRIBE_E2E=1 SCRIBE_DEMO=1 SCRIBE_DEMO_UP=1 SCRIBE_DEMO_APPLIER=$(APPLIER) go test -count=1 -v -timeout 0 -run '^TestDemo$$' ./test/e2e/

DEMO_PID_FILE ?= $${XDG_CACHE_HOME:-$$HOME/.cache}/scribe/demo-up.pid

.PHONY: demo-down
demo-down: ## Stop a loop left running by `make demo-up` (in another terminal): every process, no ports left open.
	@f="$(DEMO_PID_FILE)"; pid=$$(cat "$$f" 2>/dev/null); \
	if [ -z "$$pid" ] || ! kill -0 "$$pid" 2>/dev/null; then echo "no loop from make demo-up is running"; rm -f "$$f"; exit 0; fi; \
	echo "stopping the loop (pid $$pid)"; kill -TERM "$$pid"; \
	for i in $$(seq 1 120); do kill -0 "$$pid" 2>/dev/null || { rm -f "$$f"; echo "stopped"; exit 0; }; sleep 0.5; done; \
	echo "the loop (pid $$pid) did not stop within 60 s"; exit 1

.PHONY: test
test: node-packages $(CUE) ## Run every test, in phases with each phase's time printed (hack/test.sh): unit, envtest integration (the packages that start a kube-apiserver), four fuzz targets (the CLI's two, the YAML stream reader, the commit template; FUZZ_*_EXECS inputs each), and the end-to-end loop through real Flux and Argo CD. The loop's binaries build in the background meanwhile (cached; "build:" lines say what builds and how long it took).
	CUE=$(CUE) SCRIBE_CRDS_DIR="$(SCRIBE_CRDS_DIR)" GO_TEST_FLAGS="$(GO_TEST_FLAGS)" E2E_APPLIERS="$(E2E_APPLIERS)" E2E_PARALLEL="$(E2E_PARALLEL)" \
	FUZZ_RENDER_EXECS=$(FUZZ_RENDER_EXECS) FUZZ_FIELDS_EXECS=$(FUZZ_FIELDS_EXECS) FUZZ_SPLIT_EXECS=$(FUZZ_SPLIT_EXECS) FUZZ_COMMIT_EXECS=$(FUZZ_COMMIT_EXECS) FUZZ_MINIMIZE=$(FUZZ_MINIMIZE) \
	hack/test.sh

.PHONY: test-unit
test-unit: $(CUE) ## The quick loop: every package's unit, golden and hostile-input tests with -short (the long soak tests skip), no kube-apiserver, no fuzzing, no loop. `make test` runs everything.
	CUE=$(CUE) SCRIBE_CRDS_DIR="$(SCRIBE_CRDS_DIR)" GO_TEST_FLAGS="$(GO_TEST_FLAGS)" hack/test.sh unit

.PHONY: test-race
test-race: ## Run the render engine's concurrency test (and the health verdicts) under the race detector.
	go test -race -count=1 -timeout 30m ./render/ ./internal/health/

.PHONY: test-e2e
test-e2e: loop-assets ## Run only the end-to-end tests through the real loop.
	SCRIBE_E2E=1 SCRIBE_E2E_APPLIER=$(E2E_APPLIERS) go test $(GO_TEST_FLAGS) -v -parallel $(E2E_PARALLEL) -timeout 60m ./test/e2e/

.PHONY: bench-e2e
bench-e2e: loop-assets ## Measure the loop's latencies over 20 changes (CR change -> applied, with and without the reconcile request; canary step), the real node's (pod create -> Ready; CR change -> pods Ready beside kwok; RSS), a 20-step canary's commit -> route accepted -> analysis passed -> next commit on the real node (Traefik) and on kwok, with Traefik's and Prometheus' RSS, Argo CD's repo-server and application-controller CPU per commit, and at SCRIBE_BENCH_SCALE sizes (default 100,250,500), with per-CR GitRepositories and with per-CR OCI artifacts (SCRIBE_BENCH_SCALE_SOURCES=git,artifacts; SCRIBE_BENCH_FLUX_ARGS adds flags to the Flux controllers), the bring-up through Flux stage by stage with the CPU each process used, a CR change's latency and Flux's CPU per commit beyond its background.
	@# The whole output goes to bench-e2e.log; RESULT lines and failures are shown.
	SCRIBE_E2E=1 SCRIBE_BENCH_E2E=1 go test -count=1 -v -timeout 150m -run '^(TestBenchLoop(Latency|Scale)|TestBenchNode|TestBenchCanaryStep)$$' ./test/e2e/ 2>&1 | tee bench-e2e.log | grep -E 'RESULT|--- |timed out|^(ok|FAIL)'

.PHONY: loop-assets
loop-assets: node-packages ## Build (or find cached) kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kwok, the Flux controllers, Argo CD (application-controller, repo-server), kustomize, a Redis server, Gitea, Traefik, Prometheus, Argo Workflows (workflow-controller, argoexec) and an OpenTelemetry Collector (otlp, batch, resource, attributes, file); install the real node's Debian packages when missing.
	hack/build-control-plane.sh kube-controller-manager kube-scheduler kubelet kube-proxy >/dev/null
	hack/build-loop.sh >/dev/null
	hack/build-argocd.sh >/dev/null
	hack/build-gitea.sh >/dev/null
	hack/build-traefik.sh >/dev/null
	hack/build-prometheus.sh >/dev/null
	hack/build-argo-workflows.sh >/dev/null
	hack/build-otelcol.sh >/dev/null

##@ Development

.PHONY: build
build: ## Build bin/scribe.
	go build -o bin/scribe ./cmd/scribe

.PHONY: fmt vet lint
fmt:
	gofmt -w $$(git ls-files '*.go')
	$(CUE) fmt ./templates/... ./catalog/... 2>/dev/null || true
vet:
	go vet ./...
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run ./...

.PHONY: update-golden
update-golden: ## Rewrite golden files from the current templates.
	go test -timeout 45m ./render ./cmd/scribe ./internal/publish/gitsink -update

.PHONY: bench
bench: envtest-assets ## Run Go benchmarks (render, the CLI over 50 Workloads with /usr/bin/time -v, publish, catalog loading, 1000 Workloads at once on envtest (the controller built as the image builds it, config/admission's policies installed; SCRIBE_BENCH_ADMISSION=none leaves them out), a bystander Workload's commit latency while other tenants' largest Experiments render (SCRIBE_BENCH_LARGEST=2,4 tenants) and while a tenant's workers run the worst analysis a tenant can write (SCRIBE_BENCH_HOSTILE_WORKERS=8); the first run generates a 100k-commit repository into the cache). SCRIBE_BENCH_WORKLOADS=200 for a quicker burst.
	go test -run '^$$' -bench . -benchmem ./render/... ./internal/publish/...
	go test -run '^$$' -bench CLIRender -benchmem ./cmd/scribe/
	go test -run '^$$' -bench Catalog -benchmem ./controller/
	hack/bench-cli.sh
	SCRIBE_CRDS_DIR="$(SCRIBE_CRDS_DIR)" KUBEBUILDER_ASSETS="$$(hack/build-control-plane.sh)" go test -run '^$$' -bench '(Create|StartWith)1000Workloads' -benchtime=1x -timeout 30m ./controller/
	SCRIBE_CRDS_DIR="$(SCRIBE_CRDS_DIR)" KUBEBUILDER_ASSETS="$$(hack/build-control-plane.sh)" go test -run '^$$' -bench 'Bystander' -benchtime=1x -timeout 30m ./controller/
	SCRIBE_CRDS_DIR="$(SCRIBE_CRDS_DIR)" KUBEBUILDER_ASSETS="$$(hack/build-control-plane.sh)" go test -run '^$$' -bench 'ControllerProcess1000Workloads' -benchtime=1x -timeout 30m ./cmd/scribe/

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC into config/.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	@if ls controller/*.go >/dev/null 2>&1; then $(CONTROLLER_GEN) rbac:roleName=scribe-manager paths=./controller/... output:rbac:artifacts:config=config/rbac; fi
	$(MAKE) chart-crds

# Deployment. config/default is built with the kustomize Go API in go.mod
# (hack/kbuild), so kustomize is not needed; install, uninstall and deploy
# pipe it into kubectl, which must be on PATH and pointed at the cluster.
IMG ?= scribe:latest
KBUILD := go run ./hack/kbuild
KUBECTL ?= kubectl

.PHONY: render-config
render-config: ## Print config/default as YAML, with IMG as the image (no kubectl needed).
	@$(KBUILD) -image scribe=$(IMG) config/default

.PHONY: install uninstall
install: ## Install the CRDs into the current kubectl context (needs kubectl).
	$(KBUILD) config/crd | $(KUBECTL) apply --server-side -f -
uninstall: ## Delete the CRDs, and with them every Scribe custom resource (needs kubectl).
	$(KBUILD) config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy undeploy
deploy: ## Deploy config/default with image IMG to the current kubectl context (needs kubectl).
	$(KBUILD) -image scribe=$(IMG) config/default | $(KUBECTL) apply --server-side -f -
undeploy: ## Delete everything deploy created, CRDs included (needs kubectl).
	$(KBUILD) config/default | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: run
run: ## Run the controller against the current kubeconfig, metrics on plain HTTP :8080.
	go run ./cmd/scribe controller --metrics-secure=false --metrics-bind-address=:8080

# make image builds without Docker (hack/image, go-containerregistry): the
# static binary on a root from scratch, as the Dockerfile lays it out.
PLATFORMS ?= linux/amd64
DEMO_APP_IMG ?= demo-app:latest

.PHONY: image
image: ## Build Scribe's image IMG without Docker. An IMG naming a registry (host with a dot or port, or localhost: IMG=127.0.0.1:5000/scribe:dev) is pushed there, plain HTTP to a loopback one; otherwise (the default scribe:latest) it is written as an OCI layout to bin/image/scribe. PLATFORMS=linux/amd64,linux/arm64 for both.
	go run ./hack/image -app scribe -img $(IMG) -platforms $(PLATFORMS)

.PHONY: demo-app-image
demo-app-image: ## Build the demo app's image DEMO_APP_IMG (default demo-app:latest) like image: pushed when it names a registry, else the OCI layout bin/image/demo-app.
	go run ./hack/image -app demo-app -img $(DEMO_APP_IMG) -platforms $(PLATFORMS)

.PHONY: docker-build
docker-build: ## Build the container image IMG with the Dockerfile (needs a Docker engine; make image does not).
	docker build --build-arg VERSION=$$(git describe --tags --always --dirty) -t $(IMG) .

.PHONY: chart-crds
chart-crds: ## Generate charts/scribe's CRD templates (crds.install, crds.keep) and its manager, edit and view ClusterRoles from config/.
	hack/gen-chart.sh

.PHONY: helm chart-lint chart-render
helm: ## Build (or find cached) the helm CLI that the chart's tests and targets run (hack/build-helm.sh; not in go.mod).
	hack/build-helm.sh >/dev/null
chart-lint: ## helm lint --strict charts/scribe.
	"$$(hack/build-helm.sh)" lint --strict charts/scribe
chart-render: ## Print charts/scribe as `helm template` renders it into scribe-system; HELM_ARGS='--set image.tag=v1' adds arguments.
	@"$$(hack/build-helm.sh)" template scribe charts/scribe -n scribe-system $(HELM_ARGS)

.PHONY: generate
generate: $(CONTROLLER_GEN) $(CUE) ## Generate deepcopy functions, the CUE definitions of the render contract (render/contract, api/v1alpha1) the templates import, and the compiled schema checks embedded in render (render/schemachecks.json.gz).
	$(CONTROLLER_GEN) object paths=./api/...
	CUE=$(CUE) hack/gen-contract.sh
	go test ./render -run '^TestEmbeddedSchemaChecks$$' -count=1 -update

.PHONY: schemas
schemas: $(CUE) ## Regenerate the CUE schemas in schemas/ from k8s.io/api and the upstream CRDs (internal/crds), and the compiled schema checks.
	SCRIBE_CRDS_DIR="$(SCRIBE_CRDS_DIR)" CUE=$(CUE) hack/gen-schemas.sh
	go test ./render -run '^TestEmbeddedSchemaChecks$$' -count=1 -update

.PHONY: node-packages
node-packages: ## Install the Debian packages of the real node when missing (containerd, runc, CNI plugins, iptables, conntrack; needs root, says what it installs).
	hack/node-packages.sh

.PHONY: refresh-crds
refresh-crds: ## Refresh the upstream CRDs the repository carries (internal/crds/upstream) from the mirror in SCRIBE_CRDS_DIR, checking every file first; `go run ./hack/crds -h` for git sources.
	@test -n "$(SCRIBE_CRDS_DIR)" || { echo "refresh-crds: set SCRIBE_CRDS_DIR to an offline mirror (one folder per project)" >&2; exit 1; }
	go run ./hack/crds -from-mirror "$(SCRIBE_CRDS_DIR)"

.PHONY: envtest-assets
envtest-assets: ## Build etcd and kube-apiserver from the Go module proxy into the cache (once per version).
	hack/build-control-plane.sh >/dev/null

##@ Tools (cached outside the repo, keyed by version)

$(CONTROLLER_GEN):
	GOBIN=$(dir $@) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
$(CUE):
	@echo "building cue $(CUE_VERSION) into $(dir $@)"
	GOBIN=$(dir $@) go install cuelang.org/go/cmd/cue@$(CUE_VERSION)
$(GOLANGCI_LINT):
	GOBIN=$(dir $@) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
