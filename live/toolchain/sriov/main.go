// The SR-IOV network operator's own SriovNetwork and SriovIBNetwork reconcilers (its controllers package, v1.5.0),
// run by a controller-runtime manager against a kubeconfig, and nothing else.
//
// The operator's main.go also starts the node-policy, operator-config, pool-config and drain controllers, reads
// the supported-NICs ConfigMap and detects the platform (OpenShift's ClusterVersion and MachineConfigPools): all
// of that is the node side, which needs real NICs and nodes. The part that makes a project's
// NetworkAttachmentDefinition from a SriovNetwork needs only what is set up here, as main.go sets it up: the
// scheme, the spec.networkNamespace index (the reconciler lists networks by it when a namespace appears),
// NAMESPACE and RESOURCE_PREFIX from the environment (pkg/vars), and the NAD template folder (api/v1.ManifestsPath,
// relative to the working directory in the operator's image; a flag here).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	netattdefv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sriovnetworkv1 "github.com/k8snetworkplumbingwg/sriov-network-operator/api/v1"
	"github.com/k8snetworkplumbingwg/sriov-network-operator/controllers"
	snolog "github.com/k8snetworkplumbingwg/sriov-network-operator/pkg/log"
	"github.com/k8snetworkplumbingwg/sriov-network-operator/pkg/vars"
)

func main() {
	manifests := flag.String("manifests", "", "the operator's bindata/manifests/cni-config folder (the NAD templates)")
	snolog.BindFlags(flag.CommandLine)
	flag.Parse() // controller-runtime's --kubeconfig flag too
	snolog.InitLog()
	if err := run(*manifests); err != nil {
		fmt.Fprintln(os.Stderr, "sriov-network-controller:", err)
		os.Exit(1)
	}
}

func run(manifests string) error {
	if vars.Namespace == "" || vars.ResourcePrefix == "" {
		return fmt.Errorf("NAMESPACE and RESOURCE_PREFIX must be set (the operator's Deployment sets them)")
	}
	if st, err := os.Stat(manifests); err != nil || !st.IsDir() {
		return fmt.Errorf("--manifests %q is not the operator's cni-config folder", manifests)
	}
	sriovnetworkv1.ManifestsPath = manifests

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(sriovnetworkv1.AddToScheme(scheme))
	utilruntime.Must(netattdefv1.AddToScheme(scheme))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	vars.Config = cfg
	vars.Scheme = scheme
	// main.go's "global" manager: every namespace, no leader election, no metrics, no probes (live/sriov.py reads the
	// log for "Starting workers").
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: server.Options{BindAddress: "0"},
	})
	if err != nil {
		return err
	}
	ctx := context.Background()
	index := func(obj client.Object, namespace func(client.Object) string) error {
		return mgr.GetCache().IndexField(ctx, obj, "spec.networkNamespace", func(o client.Object) []string { return []string{namespace(o)} })
	}
	if err := index(&sriovnetworkv1.SriovNetwork{}, func(o client.Object) string { return o.(*sriovnetworkv1.SriovNetwork).Spec.NetworkNamespace }); err != nil {
		return err
	}
	if err := index(&sriovnetworkv1.SriovIBNetwork{}, func(o client.Object) string { return o.(*sriovnetworkv1.SriovIBNetwork).Spec.NetworkNamespace }); err != nil {
		return err
	}
	if err := (&controllers.SriovNetworkReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("SriovNetwork controller: %w", err)
	}
	if err := (&controllers.SriovIBNetworkReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("SriovIBNetwork controller: %w", err)
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
