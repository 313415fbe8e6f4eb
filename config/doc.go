// Package config holds Scribe's kustomize deployment: crd/ (the generated
// CustomResourceDefinitions), rbac/, manager/ (namespace, Deployment,
// metrics Service) and default/, which composes them into scribe-system.
// It has no Go code; its tests build default/ with the kustomize Go API and
// check what would be deployed.
package config
