# syntax=docker/dockerfile:1
# Scribe's container image: a static binary on distroless nonroot.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t scribe:latest .
#   (or: make docker-build IMG=scribe:latest)
#
# Without Docker, `make image` (hack/image, internal/imagebuild) builds the
# same image with go-containerregistry: /scribe, user 65532:65532,
# ENTRYPOINT ["/scribe"], CMD ["controller"], on a root from scratch with
# what distroless/static gives (/etc/passwd and /etc/group with nonroot,
# the CA bundle, /tmp, /home/nonroot). A test in internal/imagebuild fails
# when this file's final stage and that builder disagree; change both.
#
# The image holds nothing but /scribe: no shell and no git binary. The
# controller does not need git: Git sinks use go-git (pure Go); the only
# os/exec calls to git are in internal/publish/publishtest and test/e2e, which are
# test-only and not linked into cmd/scribe.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
# Dependencies first, so source changes reuse this layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/scribe ./cmd/scribe

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/scribe /scribe
# 65532 is distroless' nonroot; config/manager and the Helm chart run as it.
USER 65532:65532
ENTRYPOINT ["/scribe"]
CMD ["controller"]
