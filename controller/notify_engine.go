package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/argoproj/notifications-engine/pkg/api"
	"github.com/argoproj/notifications-engine/pkg/services"
	"github.com/argoproj/notifications-engine/pkg/subscriptions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// engineConfigTTL is how long the ConfigMap and Secret read are used
// before they are read again: a change to either applies within it.
const engineConfigTTL = 30 * time.Second

// engineSink sends an Event through Argo's notifications engine, as Argo
// Rollouts does: the Event's reason names a trigger (triggerFor); the
// object's annotations notifications.argoproj.io/subscribe.<trigger>.<service>
// (and the ConfigMap's subscriptions) name where it goes; the trigger's
// conditions choose the templates; services, triggers and templates are
// the keys of NotificationsConfigMap, with $secret-key references to
// NotificationsSecret, over Scribe's defaultNotificationsConfig.
type engineSink struct {
	reader    client.Reader
	namespace string

	mu      sync.Mutex
	api     api.API
	secrets []string // the Secret's values, kept out of errors
	// recipients are what RecipientsKey allows.
	recipients recipients
	read       time.Time
	now        func() time.Time
}

func newEngineSink(reader client.Reader, namespace string) *engineSink {
	return &engineSink{reader: reader, namespace: namespace, now: time.Now}
}

func (s *engineSink) name() string { return "engine" }

func (s *engineSink) send(ctx context.Context, n notification) error {
	o, ok := n.obj.(metav1.Object)
	if !ok {
		return nil
	}
	trigger := triggerFor(n.kind, n.reason)
	subs := subscriptionAnnotations(o.GetAnnotations())
	if len(subs) == 0 && !s.hasGlobalSubscriptions(ctx) {
		return nil
	}
	eng, secrets, allowed, err := s.engine(ctx)
	if err != nil || eng == nil {
		return err
	}
	cfg := eng.GetConfig()
	dests := cfg.GetGlobalDestinations(o.GetLabels())
	var errs []error
	for _, d := range subs.GetDestinations(cfg.DefaultTriggers, cfg.ServiceDefaultTriggers)[trigger] {
		if !allowed.allow(o.GetNamespace(), d) {
			errs = append(errs, fmt.Errorf("trigger %s to %s: %s/%s subscribes %s, which the ConfigMap's %s does not allow for namespace %s: not sent",
				trigger, d.Service, o.GetNamespace(), o.GetName(), recipientName(d), RecipientsKey, o.GetNamespace()))
			continue
		}
		dests[trigger] = append(dests[trigger], d)
	}
	if len(dests[trigger]) == 0 {
		return errors.Join(errs...)
	}
	vars, err := templateVars(n)
	if err != nil {
		return err
	}
	results, err := eng.RunTrigger(trigger, vars)
	if err != nil {
		return fmt.Errorf("trigger %s: %w", trigger, err)
	}
	for _, r := range results {
		if !r.Triggered {
			continue
		}
		for _, d := range dests[trigger] {
			if err := eng.Send(vars, r.Templates, d); err != nil {
				errs = append(errs, fmt.Errorf("trigger %s to %s: %w", trigger, d.Service, redact(err, secrets)))
			}
		}
	}
	return errors.Join(errs...)
}

// subscriptionAnnotationPrefix starts the annotations that subscribe an
// object to triggers, as on Argo CD Applications and Argo Rollouts.
const subscriptionAnnotationPrefix = "notifications.argoproj.io/subscri"

// subscriptionAnnotations are the object's subscriptions (subscribe.*,
// subscriptions) without its other annotations, which the engine would
// read as subscriptions to its default triggers.
func subscriptionAnnotations(annotations map[string]string) subscriptions.Annotations {
	subs := subscriptions.Annotations{}
	for k, v := range annotations {
		if strings.HasPrefix(k, subscriptionAnnotationPrefix) {
			subs[k] = v
		}
	}
	return subs
}

// hasGlobalSubscriptions: the ConfigMap subscribes objects by label, so
// an object without subscription annotations may still be subscribed.
func (s *engineSink) hasGlobalSubscriptions(ctx context.Context) bool {
	eng, _, _, err := s.engine(ctx)
	return err == nil && eng != nil && len(eng.GetConfig().Subscriptions) > 0
}

// engine is the engine of the ConfigMap and Secret as last read, and the
// recipients it allows, read again past engineConfigTTL; nil when there
// is no ConfigMap.
func (s *engineSink) engine(ctx context.Context) (api.API, []string, recipients, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.read.IsZero() && s.now().Sub(s.read) < engineConfigTTL {
		return s.api, s.secrets, s.recipients, nil
	}
	cm := &corev1.ConfigMap{}
	err := s.reader.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: NotificationsConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		s.api, s.secrets, s.recipients, s.read = nil, nil, nil, s.now()
		return nil, nil, nil, nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read ConfigMap %s/%s: %w", s.namespace, NotificationsConfigMap, err)
	}
	secret := &corev1.Secret{}
	if err := s.reader.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: NotificationsSecret}, secret); err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, nil, fmt.Errorf("read Secret %s/%s: %w", s.namespace, NotificationsSecret, err)
	}
	secrets := secretValues(secret)
	eng, err := newEngine(cm, secret)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("ConfigMap %s/%s: %w", s.namespace, NotificationsConfigMap, redact(err, secrets))
	}
	allowed, err := parseRecipients(cm.Data[RecipientsKey])
	if err != nil {
		return nil, nil, nil, fmt.Errorf("ConfigMap %s/%s: %s: %w", s.namespace, NotificationsConfigMap, RecipientsKey, err)
	}
	s.api, s.secrets, s.recipients, s.read = eng, secrets, allowed, s.now()
	return eng, secrets, allowed, nil
}

// newEngine builds the notifications engine of cm over Scribe's default
// triggers and templates.
func newEngine(cm *corev1.ConfigMap, secret *corev1.Secret) (api.API, error) {
	merged := cm.DeepCopy()
	merged.Data = defaultNotificationsConfig()
	maps.Copy(merged.Data, cm.Data)
	cfg, err := api.ParseConfig(merged, secret)
	if err != nil {
		return nil, err
	}
	// The template variables are those send passes (templateVars): as
	// they are to a trigger's conditions, and with every string made inert
	// for the service type of the destination to a template.
	types := serviceTypes(merged.Data)
	return api.NewAPI(*cfg, func(vars map[string]any, dest services.Destination) map[string]any {
		if dest.Service == "" {
			return vars
		}
		return escapeTree(vars, escaperFor(types[dest.Service])).(map[string]any)
	})
}

// serviceTypes maps each service's name to its type, as the engine reads
// the ConfigMap keys service.<type> and service.<type>.<name>.
func serviceTypes(data map[string]string) map[string]string {
	types := map[string]string{}
	for k := range data {
		parts := strings.Split(k, ".")
		switch {
		case parts[0] != "service":
		case len(parts) == 2:
			types[parts[1]] = parts[1]
		case len(parts) == 3:
			types[parts[2]] = parts[1]
		}
	}
	return types
}

// templateVars are what triggers' conditions and templates read: the
// object as .obj and by its kind (.workload, .experiment, .pipeline), and
// the Event as .event (type, reason, message, revision).
func templateVars(n notification) (map[string]any, error) {
	obj, err := objectMap(n.obj)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"obj":                   obj,
		strings.ToLower(n.kind): obj,
		"event": map[string]any{
			"type": n.typ, "reason": n.reason, "message": n.message, "revision": n.revision,
		},
	}, nil
}

// secretValues are the values of secret worth hiding, longest first (so
// that one containing another is hidden whole).
func secretValues(secret *corev1.Secret) []string {
	var vs []string
	for _, v := range secret.Data {
		if len(v) >= 4 {
			vs = append(vs, string(v))
		}
	}
	for _, v := range secret.StringData {
		if len(v) >= 4 {
			vs = append(vs, v)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return len(vs[i]) > len(vs[j]) })
	return vs
}

// urlPath matches a URL, its scheme, user and host in group 1, and what
// follows them.
var urlPath = regexp.MustCompile(`(https?://[^\s/"'?#]+)[/?#][^\s"']*`)

// redact keeps a service's credentials out of an error that is logged:
// the Secret's values, and the path, query and user of any URL the
// error names (a Slack or Teams incoming webhook's URL is its secret).
func redact(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, v := range secrets {
		msg = strings.ReplaceAll(msg, v, "*****")
	}
	msg = urlPath.ReplaceAllString(msg, "$1/…")
	return errors.New(msg)
}
