package render

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

func TestSubstituteAddressesWiresATargetsAddressIntoWorkflowParams(t *testing.T) {
	targets := map[string]bool{"app": true, "load": true}
	addrs := map[string]string{"app": "10.0.0.7"}
	for _, tc := range []struct {
		name    string
		params  string
		known   bool
		want    string
		wantErr string
	}{
		{name: "the address in a URL", params: `{"gatewayUrl": "http://{{ targets.app.address }}/", "requests": 10}`, known: true,
			want: `{"gatewayUrl":"http://10.0.0.7/","requests":10}`},
		{name: "without spaces, in a list", params: `{"urls": ["http://{{targets.app.address}}:8080"]}`, known: true,
			want: `{"urls":["http://10.0.0.7:8080"]}`},
		{name: "no reference: unchanged", params: `{"paths": "/"}`, known: true, want: `{"paths":"/"}`},
		{name: "a target the spec lacks", params: `{"u": "{{ targets.db.address }}"}`, known: true,
			wantErr: `spec.workflow.params.u: {{ targets.db.address }} names target "db", which spec.targets lacks`},
		{name: "a target without an address when workflows are committed", params: `{"u": "{{ targets.load.address }}"}`, known: true,
			wantErr: `spec.workflow.params.u: {{ targets.load.address }}: target "load" reports no address`},
		{name: "a target without an address in an earlier stage: a placeholder, only checked", params: `{"u": "http://{{ targets.load.address }}"}`, known: false,
			want: `{"u":"http://` + addressPending + `"}`},
		{name: "a typo is left as it is", params: `{"u": "{{ target.app.address }}"}`, known: true, want: `{"u":"{{ target.app.address }}"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var params any
			if err := json.Unmarshal([]byte(tc.params), &params); err != nil {
				t.Fatal(err)
			}
			got, errs := substituteAddresses(params, "spec.workflow.params", targets, addrs, tc.known)
			if tc.wantErr != "" {
				if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantErr) {
					t.Fatalf("errors %v, want %q", errs, tc.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			b, _ := json.Marshal(got)
			if string(b) != tc.want {
				t.Fatalf("got %s, want %s", b, tc.want)
			}
		})
	}
}

func TestRefusesAddressesInParamsCommittedBeforeAnyAddress(t *testing.T) {
	var params any
	_ = json.Unmarshal([]byte(`{"replicas": 2, "upstream": {"url": "http://{{ targets.app.address }}"}}`), &params)
	errs := refusesAddresses(params, "spec.targets[1].components[0].params")
	if len(errs) != 1 || errs[0].Path != "spec.targets[1].components[0].params.upstream.url" || !strings.Contains(errs[0].Message, "only workflow params") {
		t.Fatalf("errors %v", errs)
	}
}

func TestAddressesNamedListsTheTargetsWorkflowParamsNeed(t *testing.T) {
	x := &scribev1.Experiment{Spec: scribev1.ExperimentSpec{
		Targets: []scribev1.Target{
			{Name: "app"},
			{Name: "load", Components: []scribev1.Component{{Workflow: "k6", Params: &apiextensionsv1.JSON{Raw: []byte(`{"target": "http://{{ targets.edge.address }}"}`)}}}},
		},
		Workflow: &scribev1.ExperimentWorkflow{Params: &apiextensionsv1.JSON{Raw: []byte(`{"gatewayUrl": "http://{{ targets.app.address }}/"}`)}},
	}}
	if got := fmt.Sprint(AddressesNamed(x)); got != "map[app:true edge:true]" {
		t.Fatalf("AddressesNamed = %s", got)
	}
}

func TestAddressableListsATargetsEntriesInPreferenceOrder(t *testing.T) {
	obj := func(p, y string) File { return File{Path: p, Data: []byte(y)} }
	comps := []stagedComponent{
		{hydrated: &hydrated{Dir: "components/app/demo", Files: []File{
			obj("components/app/demo/ingress-web.yaml", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web, namespace: demo}\n"),
			obj("components/app/demo/service-web.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: demo}\nspec: {type: ClusterIP}\n"),
			obj("components/app/demo/service-edge.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: edge, namespace: demo}\nspec: {type: LoadBalancer}\n"),
		}}, stage: scribev1.StageComponents},
		{hydrated: &hydrated{Dir: "components/app/gw", Files: []File{
			obj("components/app/gw/gateway-public.yaml", "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: public, namespace: gw}\n"),
		}}, stage: scribev1.StageComponents},
		// Another target's, and a workflow component's: not the app's.
		{hydrated: &hydrated{Dir: "components/application/x", Files: []File{
			obj("components/application/x/service-lb.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: lb, namespace: x}\nspec: {type: LoadBalancer}\n"),
		}}, stage: scribev1.StageComponents},
	}
	var got []string
	for _, id := range addressable(comps, "app") {
		got = append(got, id.Kind+" "+id.Namespace+"/"+id.Name)
	}
	if want := "Gateway gw/public, Service demo/edge, Ingress demo/web"; strings.Join(got, ", ") != want {
		t.Fatalf("addressable = %v, want %s", got, want)
	}
}
