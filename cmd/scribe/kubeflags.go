package main

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeFlags are the flags of the commands that talk to a cluster with the
// user's kubeconfig, as kubectl does.
type kubeFlags struct {
	kubeconfig string
	context    string
	namespace  string
}

func (k *kubeFlags) add(fl *pflag.FlagSet) {
	registerKubeconfig(fl, &k.kubeconfig, "$KUBECONFIG, then ~/.kube/config")
	fl.StringVar(&k.context, "context", "", "kubeconfig context (default the current context)")
	fl.StringVarP(&k.namespace, "namespace", "n", "", "namespace (default the context's, else default)")
}

// config is the REST config and the namespace the flags name: -n, else
// the context's.
func (k *kubeFlags) config() (*rest.Config, string, error) {
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = k.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, &clientcmd.ConfigOverrides{CurrentContext: k.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	ns := k.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", fmt.Errorf("kubeconfig: namespace: %w", err)
		}
	}
	return cfg, ns, nil
}
