// Package catalog is the component catalog Scribe ships: the built-in
// entries (builtin/, CUE package catalog, embedded in the binary) and the
// manifests they deliver (apps/, config/, workflows/). A platform team
// publishes this directory, unchanged, as a Git repository or an OCI
// artifact, and names it in Repository spec.catalog; the built-in entries'
// sources (`type: "catalog"`) resolve relative to it. entries.cue at the
// top is the platform team's own entries (empty as shipped).
package catalog

import "embed"

// FS holds the catalog directory as published.
//
//go:embed README.md entries.cue builtin apps config workflows
var FS embed.FS

// BuiltinDir is the directory of FS holding the built-in entries.
const BuiltinDir = "builtin"
