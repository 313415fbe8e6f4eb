# Multi-stage build of the scribe binary: static, on distroless nonroot.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/scribe ./cmd/scribe

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/scribe /usr/local/bin/scribe
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/scribe"]
