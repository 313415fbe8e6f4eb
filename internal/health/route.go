package health

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ReasonRouteRefused: a parent (Gateway) of an HTTPRoute reports the route
// Accepted=False or ResolvedRefs=False at the route's generation. The
// rollout holds: traffic does not move as the committed weights say.
const ReasonRouteRefused = "RouteRefused"

const groupGateway = "gateway.networking.k8s.io"

// Route decides whether the Gateway API implementation serves an HTTPRoute
// (or any route kind with the Gateway API RouteStatus): Healthy once every
// parentRef has a status.parents entry whose Accepted and ResolvedRefs
// conditions are True at the route's metadata.generation. A parent that
// reports either False at that generation refuses the route: Pending with
// ReasonRouteRefused and a message naming the parent and the
// implementation's reason and message (Pending, not Failed: a refused
// route is a configuration to fix, not a version to roll back). A parent
// that has not reported on this generation yet is Pending NotObserved.
func Route(u *unstructured.Unstructured) Verdict {
	o := content(u)
	_, _, subj := identity(u)
	v := Verdict{Subject: subj}
	if gone, ok := absent(o, v); ok {
		return gone
	}
	gen, _ := integer(o, "metadata", "generation")
	ns := str(o, "metadata", "namespace")
	refs := list(o, "spec", "parentRefs")
	if len(refs) == 0 {
		v.State, v.Reason, v.Message = Healthy, ReasonHealthy, "no parentRefs: nothing serves the route"
		return v
	}
	parents := list(o, "status", "parents")
	var waiting, refused []string
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		name := parentName(ref, ns)
		entry := parentStatus(parents, ref, ns)
		if entry == nil {
			waiting = append(waiting, fmt.Sprintf("parent %s has not reported on the route", name))
			continue
		}
		cs := conditions(entry, "conditions")
		ok := true
		for _, typ := range []string{"Accepted", "ResolvedRefs"} {
			c := findCond(cs, typ)
			switch {
			case c == nil || c.ObservedGeneration < gen:
				at := "no " + typ + " condition"
				if c != nil {
					at = fmt.Sprintf("%s at generation %d", typ, c.ObservedGeneration)
				}
				waiting = append(waiting, fmt.Sprintf("parent %s has not reported on generation %d (%s)", name, gen, at))
				ok = false
			case c.Status != "True":
				msg := fmt.Sprintf("parent %s (%s) reports %s=%s", name, str(entry, "controllerName"), typ, c.Status)
				if c.Reason != "" {
					msg += " " + c.Reason
				}
				if c.Message != "" {
					msg += ": " + c.Message
				}
				refused = append(refused, msg)
				ok = false
			}
			if !ok {
				break
			}
		}
	}
	switch {
	case len(refused) > 0:
		v.State, v.Reason, v.Message = Pending, ReasonRouteRefused, strings.Join(refused, "; ")
	case len(waiting) > 0:
		v.State, v.Reason, v.Message = Pending, ReasonNotObserved, strings.Join(waiting, "; ")
	default:
		v.State, v.Reason = Healthy, ReasonHealthy
		v.Message = fmt.Sprintf("accepted by %d parents at generation %d", len(refs), gen)
	}
	return v
}

// parentName is a parentRef as namespace/name[/sectionName][:port].
func parentName(ref map[string]any, routeNS string) string {
	ns := str(ref, "namespace")
	if ns == "" {
		ns = routeNS
	}
	s := ns + "/" + str(ref, "name")
	if sec := str(ref, "sectionName"); sec != "" {
		s += "/" + sec
	}
	if p, ok := integer(ref, "port"); ok {
		s += fmt.Sprintf(":%d", p)
	}
	return s
}

// parentStatus is the status.parents entry for ref: the same group, kind,
// namespace, name, sectionName and port, with the API's defaults applied
// on both sides.
func parentStatus(parents []any, ref map[string]any, routeNS string) map[string]any {
	want := parentKey(ref, routeNS)
	for _, p := range parents {
		pm, _ := p.(map[string]any)
		if pr := obj(pm, "parentRef"); pr != nil && parentKey(pr, routeNS) == want {
			return pm
		}
	}
	return nil
}

func parentKey(ref map[string]any, routeNS string) string {
	group, ok := field(ref, "group")
	g, _ := group.(string)
	if !ok {
		g = groupGateway
	}
	kind := str(ref, "kind")
	if kind == "" {
		kind = "Gateway"
	}
	return g + "|" + kind + "|" + parentName(ref, routeNS)
}
