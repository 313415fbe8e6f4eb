package gitsink

import (
	"fmt"
	"testing"
)

func TestObjectsOfReadsEveryObjectsIdentity(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []objectKey
	}{
		{"block style, keys sorted as render writes them",
			"apiVersion: v1\ndata:\n  kind: NotThis\n  name: nor-this\nkind: ConfigMap\nmetadata:\n  labels:\n    name: not-this-either\n  name: web\n  namespace: shop\n",
			[]objectKey{"/ConfigMap/shop/web"}},
		{"a grouped, cluster-scoped object",
			"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: admin\nrules: []\n",
			[]objectKey{"rbac.authorization.k8s.io/ClusterRole//admin"}},
		{"several documents, comments and quotes",
			"# a comment\napiVersion: v1\nkind: Service\nmetadata:\n  name: \"web\"\n  namespace: 'shop'\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n    namespace: shop\n    name: web\nspec:\n  template:\n    metadata:\n      name: pod\n",
			[]objectKey{"/Service/shop/web", "apps/Deployment/shop/web"}},
		{"flow-style metadata",
			"apiVersion: v1\nkind: Secret\nmetadata: {name: token, namespace: shop}\n",
			[]objectKey{"/Secret/shop/token"}},
		{"metadata in flow style on the next lines",
			"apiVersion: v1\nkind: Secret\nmetadata:\n  {name: token,\n   namespace: shop}\n",
			[]objectKey{"/Secret/shop/token"}},
		{"a multi-line name",
			"apiVersion: v1\nkind: Secret\nmetadata:\n  name: \"tok\n    en\"\n  namespace: shop\n",
			[]objectKey{"/Secret/shop/tok en"}},
		{"a document that is not an object is skipped",
			"resources:\n- a.yaml\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n",
			[]objectKey{"/Namespace//shop"}},
		{"garbage yields nothing", "\x00: : [", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []objectKey
			for _, o := range objectsOf([]byte(tc.data), "f.yaml") {
				got = append(got, o.key)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("objectsOf = %v, want %v", got, tc.want)
			}
		})
	}
}
