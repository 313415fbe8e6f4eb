package render

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Ownership of hydrated catalog objects. Two Experiments that name the same
// catalog component would otherwise deliver the same objects (WorkflowTemplate
// k6-http-loadgen and its RBAC in one namespace, the agent-eval
// TestWorkflowTemplates in testkube), and the applier prunes by inventory:
// deleting one Experiment would delete what the other still uses. So every
// object Scribe hydrates from the catalog is named per Experiment: its
// catalog name with OwnedSuffix appended (kustomize's nameSuffix, which also
// rewrites the references kustomize knows, and the Argo Workflows ones
// hydrate adds), except the cluster-scoped objects kustomize never renames
// (Namespace, CustomResourceDefinition, APIService), which stay shared and
// are never pruned (hydrate.SharedKinds).

// ownedExperimentChars bounds the Experiment's name in OwnedSuffix, and
// ownedHashChars is how many hex digits of the hash it carries.
const (
	ownedExperimentChars = 20
	ownedHashChars       = 10
)

// MaxOwnedSuffix is the longest suffix OwnedSuffix returns: a catalog
// object's name may have 63 minus this many characters (31).
const MaxOwnedSuffix = 1 + ownedExperimentChars + 1 + ownedHashChars

// OwnedSuffix is what Scribe appends to the name of every object it
// hydrates from the catalog for the Experiment namespace/experiment:
// "-<experiment>-<hash>", the Experiment's name (its first 20 characters,
// dots as dashes, so the suffixed name stays a DNS label for Services) and
// the first 10 hex digits of sha256("<namespace>/<experiment>"). The hash
// tells apart Experiments of the same name in other namespaces (their
// objects meet in a shared namespace such as testkube) and names cut at 20
// characters. It is at most MaxOwnedSuffix (32) characters, so a catalog
// name of up to 31 stays within the 63 of a DNS label.
func OwnedSuffix(namespace, experiment string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + experiment))
	name := strings.ReplaceAll(experiment, ".", "-")
	if len(name) > ownedExperimentChars {
		name = name[:ownedExperimentChars]
	}
	name = strings.TrimRight(name, "-")
	return "-" + name + "-" + hex.EncodeToString(sum[:])[:ownedHashChars]
}
