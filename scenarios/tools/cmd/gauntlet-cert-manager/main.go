// Command gauntlet-cert-manager runs cert-manager's controllers and cainjector (real
// cert-manager code, see package certmanager) as one process against a cluster given by a
// kubeconfig. The local cluster provider starts it next to the control plane.
//
//	gauntlet-cert-manager --kubeconfig ~/.cache/gauntlet/clusters/dev/kubeconfig.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/certmanager/controllers"
)

func main() {
	// Our own flag set: controller-runtime registers a global -kubeconfig flag on the default one.
	fs := flag.NewFlagSet("gauntlet-cert-manager", flag.ExitOnError)
	var opts controllers.Options
	fs.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig with cluster-admin rights (empty: in-cluster config)")
	fs.StringVar(&opts.ClusterResourceNamespace, "cluster-resource-namespace", "cert-manager", "namespace of the Secrets ClusterIssuers refer to")
	fs.IntVar(&opts.Workers, "workers", 5, "workers per controller")
	fs.Func("components", "comma-separated components to run: controllers, cainjector (default both)", func(v string) error {
		opts.Components = strings.Split(v, ",")
		return nil
	})
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.Func("v", "log verbosity", func(v string) error { return klogFlags.Set("v", v) })
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	opts.Log = klog.Background().WithName("cert-manager")
	opts.Log.Info("starting cert-manager", "components", opts.Components, "controllers", controllers.Controllers)
	if err := controllers.Run(ctx, opts); err != nil {
		fmt.Fprintf(os.Stderr, "gauntlet-cert-manager: %v\n", err)
		klog.Flush()
		os.Exit(1)
	}
	opts.Log.Info("stopped")
	klog.Flush()
}
