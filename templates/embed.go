// Package templates embeds the CUE templates (one package per rendered
// resource kind), the schema registry and the built-in component catalog.
package templates

import "embed"

// FS holds the template packages.
//
//go:embed registry catalog sync workload experiment
var FS embed.FS
