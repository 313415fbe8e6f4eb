package main

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// envOTLPTracesEndpoint overrides OTEL_EXPORTER_OTLP_ENDPOINT for traces.
const envOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"

// setupTracing installs a global OpenTelemetry tracer provider that
// exports spans over OTLP/gRPC when OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; the exporter reads the other
// OTEL_EXPORTER_OTLP_* variables (headers, insecure, timeout) itself, and
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the resource.
// Without an endpoint it does nothing. The returned function flushes and
// stops the provider.
func setupTracing(ctx context.Context) (enabled bool, shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	if os.Getenv(envOTLPEndpoint) == "" && os.Getenv(envOTLPTracesEndpoint) == "" {
		return false, noop, nil
	}
	exp, err := otlptracegrpc.New(ctx)
	if err != nil {
		return false, noop, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "scribe-controller")),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return false, noop, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return true, tp.Shutdown, nil
}
