package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// A target cluster is reached through the kubeconfig Secret its provider
// writes (Cluster API's <cluster>-kubeconfig, vcluster's exported one).
// The controller reads it, never commits it: with Argo CD it registers the
// cluster from it (a cluster Secret in Argo CD's namespace), and while a
// target is not ready it asks the cluster's API server whether it answers,
// so an unreachable target is reported with the reason.

// ReasonTargetUnreachable: a target cluster's API server does not answer
// at the address its kubeconfig Secret names.
const ReasonTargetUnreachable = "TargetUnreachable"

// ReasonKubeconfigUnusable: a target's kubeconfig Secret holds no
// kubeconfig the controller may use (it reads only what the Secret holds:
// no files, credential plugins or proxies).
const ReasonKubeconfigUnusable = "KubeconfigUnusable"

// ReasonClusterNotRegistered: the Argo CD cluster Secret of a target could
// not be written.
const ReasonClusterNotRegistered = "ClusterNotRegistered"

// remoteKubeconfig is what reaching a target cluster takes, as its
// kubeconfig gives it: the server and inline TLS data and credentials.
type remoteKubeconfig struct {
	Server      string
	ServerName  string
	Insecure    bool
	CAData      []byte
	CertData    []byte
	KeyData     []byte
	BearerToken string
}

// parseRemoteKubeconfig reads the kubeconfig a provider wrote: its current
// context (or its only one). It refuses whatever would make the controller
// use anything but the Secret's own bytes, which a tenant writes: files
// (the controller's own token and certificates are files), credential
// plugins (programs), proxies, impersonation and basic auth.
func parseRemoteKubeconfig(data []byte) (remoteKubeconfig, error) {
	var k remoteKubeconfig
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return k, fmt.Errorf("not a kubeconfig: %w", err)
	}
	name := cfg.CurrentContext
	if name == "" && len(cfg.Contexts) == 1 {
		for n := range cfg.Contexts {
			name = n
		}
	}
	ctx, ok := cfg.Contexts[name]
	if !ok {
		return k, fmt.Errorf("no current context (current-context %q, %d contexts)", cfg.CurrentContext, len(cfg.Contexts))
	}
	cl, ok := cfg.Clusters[ctx.Cluster]
	if !ok {
		return k, fmt.Errorf("context %q names cluster %q, which the kubeconfig lacks", name, ctx.Cluster)
	}
	u, err := url.Parse(cl.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return k, fmt.Errorf("cluster %q: server %q is not an https URL", ctx.Cluster, cl.Server)
	}
	var refused []string
	if cl.CertificateAuthority != "" {
		refused = append(refused, "certificate-authority (a file)")
	}
	if cl.ProxyURL != "" {
		refused = append(refused, "proxy-url")
	}
	user := cfg.AuthInfos[ctx.AuthInfo]
	if user == nil {
		return k, fmt.Errorf("context %q names user %q, which the kubeconfig lacks", name, ctx.AuthInfo)
	}
	for field, set := range map[string]bool{
		"client-certificate (a file)": user.ClientCertificate != "",
		"client-key (a file)":         user.ClientKey != "",
		"tokenFile (a file)":          user.TokenFile != "",
		"exec (a credential plugin)":  user.Exec != nil,
		"auth-provider":               user.AuthProvider != nil,
		"as (impersonation)":          user.Impersonate != "" || user.ImpersonateUID != "" || len(user.ImpersonateGroups) > 0 || len(user.ImpersonateUserExtra) > 0,
		"username/password":           user.Username != "" || user.Password != "",
	} {
		if set {
			refused = append(refused, field)
		}
	}
	if len(refused) > 0 {
		slices.Sort(refused)
		return k, fmt.Errorf("the controller uses only a kubeconfig's inline data; this one sets %s", strings.Join(refused, ", "))
	}
	if user.Token == "" && (len(user.ClientCertificateData) == 0 || len(user.ClientKeyData) == 0) {
		return k, fmt.Errorf("user %q has neither a token nor client-certificate-data and client-key-data", ctx.AuthInfo)
	}
	return remoteKubeconfig{
		Server: cl.Server, ServerName: cl.TLSServerName, Insecure: cl.InsecureSkipTLSVerify,
		CAData: cl.CertificateAuthorityData, CertData: user.ClientCertificateData, KeyData: user.ClientKeyData,
		BearerToken: user.Token,
	}, nil
}

// restConfig is a client configuration for the cluster, bounded by
// timeout.
func (k remoteKubeconfig) restConfig(timeout time.Duration) *rest.Config {
	return &rest.Config{
		Host:        k.Server,
		BearerToken: k.BearerToken,
		Timeout:     timeout,
		TLSClientConfig: rest.TLSClientConfig{
			Insecure: k.Insecure, ServerName: k.ServerName,
			CAData: k.CAData, CertData: k.CertData, KeyData: k.KeyData,
		},
	}
}

// reachTimeout bounds one reachability check of a target cluster.
const reachTimeout = 5 * time.Second

// reach asks the cluster's API server for its version: any HTTP answer
// (even 401) means it is reachable. The answer's body is read up to
// 64 KiB: the server is the tenant's to choose.
func reach(ctx context.Context, k remoteKubeconfig) error {
	_, _, err := remoteGet(ctx, k, "/version", 64<<10)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
	}
	return err
}

// remoteGet GETs path (JSON) from the cluster's API server, bounded by
// reachTimeout and reading at most limit+1 bytes of the body (the server
// is the tenant's to choose): its status code and that body.
func remoteGet(ctx context.Context, k remoteKubeconfig, path string, limit int64) (int, []byte, error) {
	hc, err := rest.HTTPClientFor(k.restConfig(reachTimeout))
	if err != nil {
		return 0, nil, err
	}
	status, _, body, err := boundedGet(ctx, hc, strings.TrimSuffix(k.Server, "/")+path, reachTimeout, limit)
	return status, body, err
}

// argoClusterConfig is Argo CD's cluster Secret `config`, the fields
// Scribe sets.
type argoClusterConfig struct {
	BearerToken     string              `json:"bearerToken,omitempty"`
	TLSClientConfig argoTLSClientConfig `json:"tlsClientConfig"`
}

type argoTLSClientConfig struct {
	Insecure   bool   `json:"insecure"`
	ServerName string `json:"serverName,omitempty"`
	CAData     []byte `json:"caData,omitempty"`
	CertData   []byte `json:"certData,omitempty"`
	KeyData    []byte `json:"keyData,omitempty"`
}

// Labels of Scribe's Argo CD cluster Secrets.
const (
	argoSecretTypeLabel = "argocd.argoproj.io/secret-type"
	labelTarget         = "scribe.dev/target"
)

// argoClusterSecretName is the Secret, in Argo CD's namespace, that
// registers the cluster Argo CD knows as cluster.
func argoClusterSecretName(cluster string) string {
	sum := sha256.Sum256([]byte(cluster))
	return "scribe-cluster-" + hex.EncodeToString(sum[:8])
}

// argoClusterSecret registers a target's cluster with Argo CD: the name its
// Applications' destination gives, the kubeconfig's server and inline
// credentials, scoped to the Experiment's AppProject so that no other
// project's Application can deliver to it.
func argoClusterSecret(namespace, cluster, project string, exp types.NamespacedName, target string, k remoteKubeconfig) (*corev1.Secret, error) {
	cfg, err := json.Marshal(argoClusterConfig{
		BearerToken: k.BearerToken,
		TLSClientConfig: argoTLSClientConfig{
			Insecure: k.Insecure, ServerName: k.ServerName, CAData: k.CAData, CertData: k.CertData, KeyData: k.KeyData,
		},
	})
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: argoClusterSecretName(cluster), Namespace: namespace,
			Labels: map[string]string{
				argoSecretTypeLabel:            "cluster",
				"app.kubernetes.io/managed-by": "scribe",
				"scribe.dev/experiment":        exp.Name,
				"scribe.dev/namespace":         exp.Namespace,
				labelTarget:                    target,
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"name": []byte(cluster), "server": []byte(k.Server), "project": []byte(project), "config": cfg},
	}, nil
}

// errRegistrationNotPermitted: Scribe may not write cluster Secrets in Argo
// CD's namespace (the chart's argocdClusters.register is off): the platform
// registers the clusters.
var errRegistrationNotPermitted = errors.New("not permitted to write cluster Secrets there (the chart's argocdClusters.register is off)")

// registrationOf reports whether s is Scribe's registration for the
// Experiment's target.
func registrationOf(s *corev1.Secret, exp types.NamespacedName, target string) bool {
	l := s.GetLabels()
	return l["app.kubernetes.io/managed-by"] == "scribe" && l[argoSecretTypeLabel] == "cluster" &&
		l["scribe.dev/experiment"] == exp.Name && l["scribe.dev/namespace"] == exp.Namespace && l[labelTarget] == target
}

// registerArgoCluster writes want, Scribe's registration of one target's
// cluster, unless a Secret of that name that is not that registration is
// there.
func (r *ExperimentReconciler) registerArgoCluster(ctx context.Context, want *corev1.Secret, exp types.NamespacedName, target string) error {
	got := &corev1.Secret{}
	err := r.Publisher.Reader.Get(ctx, client.ObjectKeyFromObject(want), got)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Publisher.Client.Create(ctx, want); err != nil {
			if apierrors.IsForbidden(err) {
				return errRegistrationNotPermitted
			}
			return fmt.Errorf("create Argo CD cluster Secret %s/%s: %w", want.Namespace, want.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get Argo CD cluster Secret %s/%s: %w", want.Namespace, want.Name, err)
	case !registrationOf(got, exp, target):
		return fmt.Errorf("Secret %s/%s exists and is not Scribe's registration of target %s of Experiment %s", want.Namespace, want.Name, target, exp)
	case equalData(got.Data, want.Data):
		return nil
	}
	got.Data = want.Data
	if err := r.Publisher.Client.Update(ctx, got); err != nil {
		return fmt.Errorf("update Argo CD cluster Secret %s/%s: %w", want.Namespace, want.Name, err)
	}
	return nil
}

// unregisterArgoClusters deletes the Experiment's Argo CD cluster Secrets in
// namespace whose target keep does not hold (nil: all of them).
func (r *ExperimentReconciler) unregisterArgoClusters(ctx context.Context, namespace string, exp types.NamespacedName, keep map[string]bool) error {
	list := &corev1.SecretList{}
	if err := r.Publisher.Reader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{
		argoSecretTypeLabel: "cluster", "app.kubernetes.io/managed-by": "scribe",
		"scribe.dev/experiment": exp.Name, "scribe.dev/namespace": exp.Namespace,
	}); err != nil {
		if apierrors.IsForbidden(err) {
			return nil // not granted: Scribe wrote none there
		}
		return fmt.Errorf("list Argo CD cluster Secrets of %s in %s: %w", exp, namespace, err)
	}
	var errs []error
	for i := range list.Items {
		s := &list.Items[i]
		if keep[s.Labels[labelTarget]] {
			continue
		}
		if err := r.Publisher.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete Argo CD cluster Secret %s/%s: %w", s.Namespace, s.Name, err))
		}
	}
	return errors.Join(errs...)
}

func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if string(b[k]) != string(v) {
			return false
		}
	}
	return true
}

// addressPlurals are the resources of the kinds that may report a target's
// address (render's addressable objects).
var addressPlurals = map[string]string{"Gateway": "gateways", "Service": "services", "Ingress": "ingresses"}

// addressOf is the address an object's status reports: a Gateway's first
// status.addresses value, a LoadBalancer Service's or an Ingress's first
// status.loadBalancer.ingress IP or hostname; "" when it reports none.
func addressOf(obj map[string]any) string {
	status, _ := obj["status"].(map[string]any)
	if status == nil {
		return ""
	}
	if kind, _ := obj["kind"].(string); kind == "Gateway" {
		addrs, _ := status["addresses"].([]any)
		for _, a := range addrs {
			if m, ok := a.(map[string]any); ok {
				if v, _ := m["value"].(string); v != "" {
					return v
				}
			}
		}
		return ""
	}
	lb, _ := status["loadBalancer"].(map[string]any)
	ingress, _ := lb["ingress"].([]any)
	for _, in := range ingress {
		m, ok := in.(map[string]any)
		if !ok {
			continue
		}
		if ip, _ := m["ip"].(string); ip != "" {
			return ip
		}
		if host, _ := m["hostname"].(string); host != "" {
			return host
		}
	}
	return ""
}

// maxRemoteObject bounds the body of one object read from a target cluster.
const maxRemoteObject = 1 << 20

// getRemote reads one object of an address kind from the target cluster,
// bounded in time and size (the server is the tenant's to choose).
func getRemote(ctx context.Context, k remoteKubeconfig, id scribev1.ObjectIdentity) (map[string]any, error) {
	plural, ok := addressPlurals[id.Kind]
	if !ok {
		return nil, fmt.Errorf("kind %s holds no address", id.Kind)
	}
	p := "/apis/" + id.APIVersion
	if !strings.Contains(id.APIVersion, "/") {
		p = "/api/" + id.APIVersion
	}
	p += "/namespaces/" + url.PathEscape(id.Namespace) + "/" + plural + "/" + url.PathEscape(id.Name)
	code, body, err := remoteGet(ctx, k, p, maxRemoteObject)
	if err != nil {
		return nil, err
	}
	switch {
	case code == http.StatusNotFound:
		return nil, nil
	case code != http.StatusOK:
		return nil, fmt.Errorf("GET %s: %d %s", p, code, http.StatusText(code))
	case len(body) > maxRemoteObject:
		return nil, fmt.Errorf("GET %s: more than %d bytes", p, maxRemoteObject)
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("GET %s: %w", p, err)
	}
	return obj, nil
}

// targetAddress reads the target's address from its addressable objects,
// on the hub (kc nil) or on its cluster: the first that reports one.
func (r *ExperimentReconciler) targetAddress(ctx context.Context, kc *remoteKubeconfig, ids []scribev1.ObjectIdentity) (string, error) {
	for _, id := range ids {
		var obj map[string]any
		if kc == nil {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(id.APIVersion)
			u.SetKind(id.Kind)
			if err := r.Publisher.Reader.Get(ctx, types.NamespacedName{Namespace: id.Namespace, Name: id.Name}, u); err != nil {
				if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
					continue
				}
				return "", fmt.Errorf("get %s %s/%s: %w", id.Kind, id.Namespace, id.Name, err)
			}
			obj = u.Object
		} else {
			var err error
			if obj, err = getRemote(ctx, *kc, id); err != nil {
				return "", fmt.Errorf("get %s %s/%s: %w", id.Kind, id.Namespace, id.Name, err)
			}
		}
		if a := addressOf(obj); a != "" {
			return a, nil
		}
	}
	return "", nil
}
