// Command gauntlet-cluster creates, deletes and inspects clusters of the local provider
// (package scenarios/cluster/local: a real control plane plus a process node, no containers)
// or, with --provider=kind, of the kind provider (scenarios/cluster/kind). The cluster outlives
// this command; `down` removes everything it left.
//
//	gauntlet-cluster up   [--provider P] [--name N] [--config F] [--cert-manager] [--no-node] [--retain]
//	gauntlet-cluster down [--provider P] [--name N]
//	gauntlet-cluster logs [--provider P] [--name N] [--dest DIR]
//	gauntlet-cluster list [--provider P]
//	gauntlet-cluster load --provider kind [--name N] IMAGE...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gauntlet-dev/gauntlet/scenarios/cluster/kind"
	"github.com/gauntlet-dev/gauntlet/scenarios/cluster/local"
)

const usage = `usage: gauntlet-cluster <command> [flags]

commands:
  up     create a local cluster and wait until it is ready
  down   delete a local cluster (processes, mounts, listeners, state)
  logs   export a cluster's logs (control plane, node, pods, cert-manager, objects)
  list   list clusters on this machine
  load   copy local Docker images into a kind cluster's nodes (kind load docker-image)

Run 'gauntlet-cluster <command> -h' for the command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "up":
		err = up(ctx, args)
	case "down":
		err = down(ctx, args)
	case "logs":
		err = logs(ctx, args)
	case "list":
		err = list(args)
	case "load":
		err = load(ctx, args)
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "gauntlet-cluster: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nERROR: %v\n", err)
		os.Exit(1)
	}
}

func up(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	name := fs.String("name", envOr("GAUNTLET_CLUSTER", local.DefaultName), "cluster name (env GAUNTLET_CLUSTER)")
	config := fs.String("config", "", "cluster config file (YAML, kind: LocalCluster); unset fields are derived")
	certManager := fs.Bool("cert-manager", false, "install cert-manager's CRDs and run its controllers and cainjector")
	noNode := fs.Bool("no-node", false, "start the control plane only (pods stay Pending)")
	retain := fs.Bool("retain", false, "keep the cluster if creation fails, for debugging")
	provider := providerFlag(fs)
	_ = fs.Parse(args)
	if *provider == kind.ProviderName {
		if *noNode || *retain {
			return fmt.Errorf("--no-node and --retain are flags of the local provider")
		}
		return upKind(ctx, *name, *config, *certManager)
	}

	opts := []local.Option{local.WithProgress(os.Stdout)}
	if *certManager {
		opts = append(opts, local.WithCertManager())
	}
	if *noNode {
		opts = append(opts, local.WithoutNode())
	}
	if *retain {
		opts = append(opts, local.WithRetainOnFailure())
	}
	p := local.NewProvider()
	p.WithName(*name).WithOpts(opts...)
	var (
		kubeconfig string
		err        error
	)
	if *config != "" {
		kubeconfig, err = p.CreateWithConfig(ctx, *config)
	} else {
		kubeconfig, err = p.Create(ctx)
	}
	if err != nil {
		return err
	}
	cfg, err := p.Config()
	if err != nil {
		return err
	}
	kubectl := "kubectl"
	if _, err := exec.LookPath("kubectl"); err != nil {
		kubectl = cfg.Binaries.Kubectl // the one built with the control plane
	}
	fmt.Printf(`
Kubeconfig: %s
  API server   https://127.0.0.1:%d     services %s    pods %s
Try:
  export KUBECONFIG=%s
  %s get nodes,pods -A
Logs:   make cluster-logs CLUSTER=%[7]s     (gauntlet-cluster logs --name %[7]s)
Delete: make cluster-down CLUSTER=%[7]s     (gauntlet-cluster down --name %[7]s)
`, kubeconfig, cfg.Ports.APIServer, cfg.ServiceCIDR, cfg.PodCIDR, kubeconfig, kubectl, cfg.Name)
	return nil
}

func down(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	name := fs.String("name", envOr("GAUNTLET_CLUSTER", local.DefaultName), "cluster name (env GAUNTLET_CLUSTER)")
	provider := providerFlag(fs)
	_ = fs.Parse(args)
	if *provider == kind.ProviderName {
		p := kind.NewProvider()
		p.WithName(*name)
		if exists, err := p.Exists(); err != nil || !exists {
			fmt.Printf("No kind cluster %q.\n", *name)
			return err
		}
		if err := p.Destroy(ctx); err != nil {
			return err
		}
		fmt.Printf("Deleted kind cluster %q.\n", *name)
		return nil
	}
	if _, err := os.Stat(filepath.Join(local.StateRoot(), *name)); err != nil {
		names, _ := local.Clusters()
		fmt.Printf("No local cluster %q (clusters: %s).\n", *name, orNone(names))
		// Still clean and check the host: an interrupted run may have left mounts or links.
		left, err := local.CleanDeleted(*name)
		if err != nil {
			return fmt.Errorf("checking what cluster %q left on this host: %w", *name, err)
		}
		if len(left) > 0 {
			return fmt.Errorf("cluster %q left behind:\n  %s", *name, strings.Join(left, "\n  "))
		}
		fmt.Printf("✓ Nothing of cluster %q is left on this host (processes, mounts, mount targets, listeners, links, state).\n", *name)
		return nil
	}
	p := local.NewProvider()
	p.WithName(*name).WithOpts(local.WithProgress(os.Stdout))
	if err := p.Destroy(ctx); err != nil {
		return err
	}
	fmt.Printf("Deleted cluster %q.\n", *name)
	return nil
}

func logs(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("logs", flag.ExitOnError)
	name := fs.String("name", envOr("GAUNTLET_CLUSTER", local.DefaultName), "cluster name (env GAUNTLET_CLUSTER)")
	dest := fs.String("dest", "", "directory to export into (default ./_artifacts/cluster-logs/<name>)")
	provider := providerFlag(fs)
	_ = fs.Parse(args)
	if *dest == "" {
		*dest = filepath.Join("_artifacts", "cluster-logs", *name)
	}
	var p interface {
		ExportLogs(context.Context, string) error
	}
	if *provider == kind.ProviderName {
		kp := kind.NewProvider()
		kp.WithName(*name)
		p = kp
	} else {
		lp := local.NewProvider()
		lp.WithName(*name)
		p = lp
	}
	err := p.ExportLogs(ctx, *dest)
	abs, _ := filepath.Abs(*dest)
	files := 0
	_ = filepath.WalkDir(*dest, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
		}
		return nil
	})
	fmt.Printf("Exported %d files of cluster %q to %s\n", files, *name, abs)
	listTop(os.Stdout, *dest)
	return err
}

func list(args []string) error {
	fs := flag.NewFlagSet("list", flag.ExitOnError)
	provider := providerFlag(fs)
	_ = fs.Parse(args)
	clusters := local.Clusters
	if *provider == kind.ProviderName {
		clusters = kind.NewProvider().List
	}
	names, err := clusters()
	if err != nil {
		return err
	}
	for _, n := range names {
		fmt.Println(n)
	}
	if len(names) == 0 {
		fmt.Printf("No %s clusters.\n", *provider)
	}
	return nil
}

// listTop lists dir's top-level entries to w, best effort (a listing for a person to read).
func listTop(w io.Writer, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		suffix := ""
		if e.IsDir() {
			suffix = "/"
		}
		_, _ = fmt.Fprintf(w, "  %s%s\n", e.Name(), suffix)
	}
}

func load(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	name := fs.String("name", envOr("GAUNTLET_CLUSTER", local.DefaultName), "cluster name (env GAUNTLET_CLUSTER)")
	provider := providerFlag(fs)
	_ = fs.Parse(args)
	if *provider != kind.ProviderName {
		return fmt.Errorf("load copies images into kind nodes: use --provider=kind (a local cluster runs binaries, not images)")
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("load needs at least one image, e.g. gauntlet-cluster load --provider kind --name %s dynamo-operator:dev", *name)
	}
	p := kind.NewProvider()
	p.WithName(*name)
	if exists, err := p.Exists(); err != nil || !exists {
		return errors.Join(err, fmt.Errorf("no kind cluster %q", *name))
	}
	if err := p.LoadImages(ctx, fs.Args()...); err != nil {
		return err
	}
	fmt.Printf("Loaded %s into kind cluster %q.\n", strings.Join(fs.Args(), ", "), *name)
	return nil
}

// providerFlag registers --provider: local (default) or kind.
func providerFlag(fs *flag.FlagSet) *string {
	p := fs.String("provider", envOr("GAUNTLET_PROVIDER", local.ProviderName), "cluster provider: local or kind (env GAUNTLET_PROVIDER)")
	return p
}

// upKind creates a kind cluster (the offline node image is built when missing).
func upKind(ctx context.Context, name, config string, certManager bool) error {
	p := kind.NewProvider()
	p.WithName(name).WithOpts(kind.WithProgress(os.Stdout))
	if img := os.Getenv(kind.NodeImageEnv); img != "" {
		p.WithOpts(kind.WithNodeImage(img))
	}
	if certManager {
		p.WithOpts(kind.WithCertManager())
	}
	var (
		kubeconfig string
		err        error
	)
	if config != "" {
		kubeconfig, err = p.CreateWithConfig(ctx, config)
	} else {
		kubeconfig, err = p.Create(ctx)
	}
	if err != nil {
		return err
	}
	fmt.Printf(`
Kubeconfig: %s
Try:
  export KUBECONFIG=%[1]s
  kubectl get nodes,pods -A
Logs:   make cluster-logs PROVIDER=kind CLUSTER=%[2]s
Delete: make cluster-down PROVIDER=kind CLUSTER=%[2]s
`, kubeconfig, name)
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
