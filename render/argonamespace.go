package render

import (
	"maps"

	"github.com/scribe-gitops/scribe/internal/hydrate"
)

// argoNamespace takes, out of the objects of a hydrated component Argo CD
// delivers, the Namespace they are installed in (ns): its Application
// creates that Namespace (CreateNamespace=true), and leaves out of its
// resources. Delivered as a resource, the Namespace two Applications both
// apply (two Experiments' copies of one catalog app on one cluster) has
// one tracking annotation, which each Application's sync takes from the
// other: both stay OutOfSync, syncing forever. The labels and annotations
// it carries (but the ones that only keep appliers from pruning it,
// hydrate.PruneGuard) are returned as the Application's
// managedNamespaceMetadata, which Argo CD applies server-side without
// tracking; nil when there are none. objs is not changed.
func argoNamespace(objs []map[string]any, ns string) (rest []map[string]any, metadata map[string]any) {
	rest = make([]map[string]any, 0, len(objs))
	labels, annotations := map[string]any{}, map[string]any{}
	for _, o := range objs {
		md, _ := o["metadata"].(map[string]any)
		if o["apiVersion"] != "v1" || o["kind"] != "Namespace" || md["name"] != ns {
			rest = append(rest, o)
			continue
		}
		if l, _ := md["labels"].(map[string]any); l != nil {
			maps.Copy(labels, l)
		}
		if a, _ := md["annotations"].(map[string]any); a != nil {
			for k, v := range a {
				if !hydrate.PruneGuard(k) {
					annotations[k] = v
				}
			}
		}
	}
	if len(labels) == 0 && len(annotations) == 0 {
		return rest, nil
	}
	metadata = map[string]any{}
	if len(labels) > 0 {
		metadata["labels"] = labels
	}
	if len(annotations) > 0 {
		metadata["annotations"] = annotations
	}
	return rest, metadata
}
