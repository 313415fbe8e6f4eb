package publish_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/publish"
)

// TestFileObjectsIdentifiesEachDocumentAndSkipsWhatIsNoObject: the one
// reader of objects read back from the repository keeps document order,
// leaves out empty documents and documents that do not decode, stops at a
// stream it cannot cut, and never expands an alias bomb.
func TestFileObjectsIdentifiesEachDocumentAndSkipsWhatIsNoObject(t *testing.T) {
	var bomb strings.Builder
	bomb.WriteString("a: &a [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&bomb, "%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n", 'a'+i, 'a'+i, 'a'+i-1, 'a'+i-1, 'a'+i-1, 'a'+i-1, 'a'+i-1, 'a'+i-1, 'a'+i-1, 'a'+i-1, 'a'+i-1, 'a'+i-1)
	}
	for _, tc := range []struct {
		name string
		data string
		want []string // kind/namespace/name of each object
	}{
		{name: "two objects in order",
			data: "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: a}\n---\nkind: Kustomization\nmetadata:\n  name: k\n",
			want: []string{"Service/a/web", "Kustomization//k"}},
		{name: "empty documents left out", data: "\n---\n  \n---\nkind: ConfigMap\nmetadata: {name: c}\n---\n", want: []string{"ConfigMap//c"}},
		{name: "a document that does not decode is left out", data: "kind: [\n---\nkind: ConfigMap\nmetadata: {name: c}\n", want: []string{"ConfigMap//c"}},
		{name: "a stream that cannot be cut is read up to its faulty document",
			data: "kind: ConfigMap\nmetadata: {name: c}\n---\nkind: Secret\n--- {kind: X}\n", want: []string{"ConfigMap//c"}},
		{name: "a document without identity is still read", data: "data: {}\n", want: []string{"//"}},
		{name: "an alias bomb is left out", data: bomb.String() + "---\nkind: ConfigMap\nmetadata: {name: c}\n", want: []string{"ConfigMap//c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, o := range publish.FileObjects("apps/x.yaml", []byte(tc.data)) {
				if o.File != "apps/x.yaml" || len(o.Doc) == 0 {
					t.Errorf("object %+v: want its file and document", o)
				}
				got = append(got, o.Kind+"/"+o.Namespace+"/"+o.Name)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("objects = %q, want %q", got, tc.want)
			}
		})
	}
}
