package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The loop's Gateway. Workloads' HTTPRoutes attach to the Gateway
// gateway-system/public. On the real node a real implementation serves it:
// Traefik (traffic.go), which writes route status itself and proxies to the
// pods. On kwok there are no pods to proxy to, so the loop plays the
// control-plane half of one: it owns the GatewayClass "scribe-e2e" and
// writes route status exactly as implementations do (Gateway API v1
// RouteStatus: one status.parents entry per parentRef it serves, with its
// controllerName and Accepted and ResolvedRefs conditions at the route's
// generation), so the appliers see a route attached as in a real cluster.
// Argo CD's built-in HTTPRoute health check, for one, keeps a route without
// status Progressing, and with it the Application.
//
// Likewise for Ingress: the loop owns the IngressClass "nginx" (the class
// the catalog's demo-services asks for, with its own controller name) and
// publishes each Ingress of that class at 127.0.0.1 in
// status.loadBalancer, as an ingress controller does once it serves it
// (Argo CD's Ingress health is Progressing until then).
const (
	GatewayClassName  = "scribe-e2e"
	GatewayController = "scribe.dev/e2e-gateway"
	GatewayNamespace  = "gateway-system"
	GatewayName       = "public"
	IngressClass      = "nginx"
	IngressController = "scribe.dev/e2e-ingress"
)

const gatewayGroup = "gateway.networking.k8s.io"

func gatewayObject(kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gatewayGroup + "/v1")
	u.SetKind(kind)
	return u
}

// startGateway creates the GatewayClass and the Gateway and runs the route
// status writer until ctx ends; on the real node Traefik serves the Gateway
// and only the Ingress status is played.
func (s *Stack) startGateway(ctx context.Context) error {
	if s.Node != nil {
		ic := &unstructured.Unstructured{}
		ic.SetAPIVersion("networking.k8s.io/v1")
		ic.SetKind("IngressClass")
		ic.SetName(IngressClass)
		_ = unstructured.SetNestedField(ic.Object, IngressController, "spec", "controller")
		if err := s.Client.Create(ctx, ic); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create IngressClass %s: %w", IngressClass, err)
		}
		if err := s.startTraefik(ctx); err != nil {
			return err
		}
		go s.writeRouteStatus(ctx, s.Client)
		return nil
	}
	gc := gatewayObject("GatewayClass")
	gc.SetName(GatewayClassName)
	_ = unstructured.SetNestedField(gc.Object, GatewayController, "spec", "controllerName")
	gw := gatewayObject("Gateway")
	gw.SetNamespace(GatewayNamespace)
	gw.SetName(GatewayName)
	gw.Object["spec"] = map[string]any{
		"gatewayClassName": GatewayClassName,
		"listeners": []any{map[string]any{
			"name": "http", "port": int64(80), "protocol": "HTTP",
			"allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "All"}},
		}},
	}
	ic := &unstructured.Unstructured{}
	ic.SetAPIVersion("networking.k8s.io/v1")
	ic.SetKind("IngressClass")
	ic.SetName(IngressClass)
	_ = unstructured.SetNestedField(ic.Object, IngressController, "spec", "controller")
	for _, o := range []*unstructured.Unstructured{gc, gw, ic} {
		if err := s.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	gw.Object["status"] = map[string]any{"conditions": []any{
		condition("Accepted", "True", "Accepted", "Gateway accepted", gw.GetGeneration(), now),
		condition("Programmed", "True", "Programmed", "Gateway programmed", gw.GetGeneration(), now),
	}}
	if err := s.Client.Status().Update(ctx, gw); err != nil {
		return fmt.Errorf("write the status of Gateway %s/%s: %w", GatewayNamespace, GatewayName, err)
	}
	// An implementation reads routes, Gateways and Services from its
	// informers, not from the API server on every pass: with hundreds of
	// routes, uncached reads every 250 ms were most of the API server's
	// requests during a scale run.
	informers, err := cache.New(s.Config, cache.Options{Scheme: s.Client.Scheme()})
	if err != nil {
		return fmt.Errorf("the gateway's informers: %w", err)
	}
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		return fmt.Errorf("the gateway's informers did not sync")
	}
	go s.writeRouteStatus(ctx, informers)
	return nil
}

func condition(typ, status, reason, msg string, gen int64, now string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg,
		"observedGeneration": gen, "lastTransitionTime": now}
}

// writeRouteStatus brings every HTTPRoute's status up to date every 250 ms
// (a Service a route points at may arrive after the route), reading
// routes, Gateways and Services through rd. A backend seen
// missing is reported only once it has been missing for 2 s: an applier
// creates a route's Services in the same apply, and an implementation's
// informer may see the route first.
func (s *Stack) writeRouteStatus(ctx context.Context, rd client.Reader) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	missingSince := map[types.UID]time.Time{}
	// A route whose status was found right is looked at again only when
	// it, or a Gateway or Service it names, changed, as an
	// implementation's informers would tell it: with a thousand routes,
	// copying and comparing each one four times a second made this player
	// the loop's largest user of CPU.
	settled := map[types.UID]string{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(gatewayGroup + "/v1")
		list.SetKind("HTTPRouteList")
		if s.gateway != nil {
			// Traefik writes the routes' status.
			s.ingressStatus(ctx)
			continue
		}
		// The cache's own objects, not copies: routeStatus copies a
		// route before it writes it.
		if err := rd.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			continue
		}
		gateways := objectVersions(ctx, rd, gatewayGroup+"/v1", "Gateway")
		services := objectVersions(ctx, rd, "v1", "Service")
		was := settled
		settled = make(map[types.UID]string, len(list.Items)) // deleted routes drop out
		for i := range list.Items {
			r := &list.Items[i]
			key := r.GetResourceVersion() + "/" + routeDeps(r, gateways, services)
			if was[r.GetUID()] == key {
				settled[r.GetUID()] = key
				continue
			}
			right, err := s.routeStatus(ctx, rd, r, missingSince)
			if err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				s.logf("gateway: route status of %s/%s: %v", r.GetNamespace(), r.GetName(), err)
			}
			if right {
				settled[r.GetUID()] = key
			}
		}
		s.ingressStatus(ctx)
	}
}

// ingressStatus publishes every Ingress of our class that is not yet
// published at 127.0.0.1.
func (s *Stack) ingressStatus(ctx context.Context) {
	publishIngresses(ctx, s.Client, "127.0.0.1", s.logf)
}

// publishIngresses publishes every Ingress of our class that c serves and
// that is not yet published, at ip.
func publishIngresses(ctx context.Context, c client.Client, ip string, logf func(string, ...any)) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("networking.k8s.io/v1")
	list.SetKind("IngressList")
	if err := c.List(ctx, list); err != nil {
		return
	}
	for i := range list.Items {
		in := &list.Items[i]
		if class, _, _ := unstructured.NestedString(in.Object, "spec", "ingressClassName"); class != IngressClass {
			continue
		}
		if lb, _, _ := unstructured.NestedSlice(in.Object, "status", "loadBalancer", "ingress"); len(lb) > 0 {
			continue
		}
		in.Object["status"] = map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": ip}}}}
		if err := c.Status().Update(ctx, in); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			logf("ingress: status of %s/%s: %v", in.GetNamespace(), in.GetName(), err)
		}
	}
}

// objectVersions lists kind (apiVersion, kind) from rd's cache without
// copying, as namespace/name -> resourceVersion.
func objectVersions(ctx context.Context, rd client.Reader, apiVersion, kind string) map[string]string {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(apiVersion)
	list.SetKind(kind + "List")
	out := map[string]string{}
	if err := rd.List(ctx, list, client.UnsafeDisableDeepCopy); err == nil {
		for i := range list.Items {
			out[list.Items[i].GetNamespace()+"/"+list.Items[i].GetName()] = list.Items[i].GetResourceVersion()
		}
	}
	return out
}

// routeDeps is what a route's status depends on besides the route: the
// resourceVersions (empty when missing) of the Gateways its parentRefs
// name and of the Services its backendRefs name.
func routeDeps(r *unstructured.Unstructured, gateways, services map[string]string) string {
	var b strings.Builder
	ref := func(m map[string]any, versions map[string]string) {
		ns, _ := m["namespace"].(string)
		if ns == "" {
			ns = r.GetNamespace()
		}
		name, _ := m["name"].(string)
		b.WriteString(versions[ns+"/"+name])
		b.WriteByte(',')
	}
	refs, _, _ := unstructured.NestedSlice(r.Object, "spec", "parentRefs")
	for _, p := range refs {
		if pm, ok := p.(map[string]any); ok {
			ref(pm, gateways)
		}
	}
	rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	for _, rule := range rules {
		rm, _ := rule.(map[string]any)
		backends, _ := rm["backendRefs"].([]any)
		for _, be := range backends {
			if bm, ok := be.(map[string]any); ok {
				ref(bm, services)
			}
		}
	}
	return b.String()
}

// routeStatus writes the status.parents entries of the parentRefs that
// name a Gateway of our class; other controllers' entries are kept. It
// reports whether the route's status was found right (nothing written,
// every backend resolved); r is not changed.
func (s *Stack) routeStatus(ctx context.Context, rd client.Reader, r *unstructured.Unstructured, missingSince map[types.UID]time.Time) (bool, error) {
	gen := r.GetGeneration()
	refs, _, _ := unstructured.NestedSlice(r.Object, "spec", "parentRefs")
	old, _, _ := unstructured.NestedSlice(r.Object, "status", "parents")
	var parents []any
	mine := map[string]map[string]any{}
	for _, p := range old {
		pm, _ := p.(map[string]any)
		if pm["controllerName"] != GatewayController {
			parents = append(parents, p)
			continue
		}
		key, _ := json.Marshal(pm["parentRef"])
		mine[string(key)] = pm
	}
	resolved, why := backendsResolve(ctx, rd, r)
	if resolved {
		delete(missingSince, r.GetUID())
	} else {
		since, seen := missingSince[r.GetUID()]
		if !seen {
			missingSince[r.GetUID()] = time.Now()
		}
		if !seen || time.Since(since) < 2*time.Second {
			return false, nil
		}
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	for _, ref := range refs {
		rm, _ := ref.(map[string]any)
		if !ourGateway(ctx, rd, r.GetNamespace(), rm) {
			continue
		}
		refsCond := condition("ResolvedRefs", "True", "ResolvedRefs", "Resolved all the object references for the route", gen, now)
		if !resolved {
			refsCond = condition("ResolvedRefs", "False", "BackendNotFound", why, gen, now)
		}
		conds := []any{condition("Accepted", "True", "Accepted", "Route is accepted", gen, now), refsCond}
		key, _ := json.Marshal(rm)
		if prev := mine[string(key)]; prev != nil {
			keepTransitionTimes(conds, prev["conditions"])
		}
		parents = append(parents, map[string]any{"parentRef": rm, "controllerName": GatewayController, "conditions": conds})
	}
	if reflect.DeepEqual(normalize(parents), normalize(old)) {
		return resolved, nil
	}
	w := r.DeepCopy()
	w.Object["status"] = map[string]any{"parents": parents}
	if parents == nil {
		w.Object["status"] = map[string]any{"parents": []any{}}
	}
	return false, s.Client.Status().Update(ctx, w)
}

// normalize makes a parents list comparable with one read from the API.
func normalize(v []any) any {
	if len(v) == 0 {
		return nil
	}
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// keepTransitionTimes keeps lastTransitionTime of conditions whose status
// did not change, as the API conventions ask.
func keepTransitionTimes(conds []any, prev any) {
	pl, _ := prev.([]any)
	for _, c := range conds {
		cm := c.(map[string]any)
		for _, p := range pl {
			pm, _ := p.(map[string]any)
			if pm["type"] == cm["type"] && pm["status"] == cm["status"] {
				cm["lastTransitionTime"] = pm["lastTransitionTime"]
			}
		}
	}
}

// ourGateway says whether a parentRef names a Gateway of our class.
func ourGateway(ctx context.Context, rd client.Reader, routeNS string, ref map[string]any) bool {
	if g, _ := ref["group"].(string); g != "" && g != gatewayGroup {
		return false
	}
	if k, _ := ref["kind"].(string); k != "" && k != "Gateway" {
		return false
	}
	ns, _ := ref["namespace"].(string)
	if ns == "" {
		ns = routeNS
	}
	name, _ := ref["name"].(string)
	gw := gatewayObject("Gateway")
	if err := rd.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, gw); err != nil {
		return false
	}
	class, _, _ := unstructured.NestedString(gw.Object, "spec", "gatewayClassName")
	return class == GatewayClassName
}

// backendsResolve says whether every Service backendRef of the route exists.
func backendsResolve(ctx context.Context, rd client.Reader, r *unstructured.Unstructured) (bool, string) {
	rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	for _, rule := range rules {
		rm, _ := rule.(map[string]any)
		backends, _ := rm["backendRefs"].([]any)
		for _, b := range backends {
			bm, _ := b.(map[string]any)
			if k, _ := bm["kind"].(string); k != "" && k != "Service" {
				continue
			}
			ns, _ := bm["namespace"].(string)
			if ns == "" {
				ns = r.GetNamespace()
			}
			name, _ := bm["name"].(string)
			svc := &unstructured.Unstructured{}
			svc.SetAPIVersion("v1")
			svc.SetKind("Service")
			if err := rd.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
				return false, fmt.Sprintf("Service %q not found in namespace %q", name, ns)
			}
		}
	}
	return true, ""
}
