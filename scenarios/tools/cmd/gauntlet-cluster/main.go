// Command gauntlet-cluster creates, deletes and inspects clusters that outlive it, of any
// registered cluster provider (scenarios/framework/cluster): local (scenarios/framework/cluster/local: a real
// control plane plus a process node, no containers) by default, kind
// (scenarios/framework/cluster/kind), or existing (scenarios/framework/cluster/existing: the cluster KUBECONFIG
// names, which it only checks and reads). `down` removes everything a cluster left.
//
//	gauntlet-cluster up   [--provider P] [--name N] [--config F] [--cert-manager] [--no-node] [--retain]
//	gauntlet-cluster down [--provider P] [--name N]
//	gauntlet-cluster logs [--provider P] [--name N] [--dest DIR]
//	gauntlet-cluster list [--provider P]
//	gauntlet-cluster load --provider kind [--name N] IMAGE...
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/providers"
)

const usage = `usage: gauntlet-cluster <command> [flags]

commands:
  up     create a cluster and wait until it is ready (existing: check the cluster KUBECONFIG names)
  down   delete a cluster and check nothing of it is left (local: processes, mounts, listeners, state)
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
	name := nameFlag(fs)
	config := fs.String("config", "", "cluster config file (local: YAML, kind: LocalCluster; kind: a kind Cluster config); unset fields are derived")
	certManager := fs.Bool("cert-manager", false, "install cert-manager's CRDs and run its controllers and cainjector (existing: check that it runs)")
	noNode := fs.Bool("no-node", false, "start the control plane only (pods stay Pending; local)")
	retain := fs.Bool("retain", false, "keep the cluster if creation fails, for debugging (local)")
	clusters, _, err := parseProvider(fs, args)
	if err != nil {
		return err
	}
	return clusters.Up(ctx, cluster.UpRequest{
		Name: *name, ConfigFile: *config, CertManager: *certManager, WithoutNode: *noNode, RetainOnFailure: *retain, Out: os.Stdout,
	})
}

func down(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	name := nameFlag(fs)
	clusters, _, err := parseProvider(fs, args)
	if err != nil {
		return err
	}
	return clusters.Down(ctx, *name, os.Stdout)
}

func logs(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("logs", flag.ExitOnError)
	name := nameFlag(fs)
	dest := fs.String("dest", "", "directory to export into (default ./_artifacts/cluster-logs/<name>)")
	clusters, _, err := parseProvider(fs, args)
	if err != nil {
		return err
	}
	if *dest == "" {
		*dest = filepath.Join("_artifacts", "cluster-logs", *name)
	}
	err = clusters.ExportLogs(ctx, *name, *dest)
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
	clusters, provider, err := parseProvider(fs, args)
	if err != nil {
		return err
	}
	names, err := clusters.List()
	if err != nil {
		return err
	}
	for _, n := range names {
		fmt.Println(n)
	}
	if len(names) == 0 {
		fmt.Printf("No %s clusters.\n", provider)
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
	name := nameFlag(fs)
	clusters, _, err := parseProvider(fs, args)
	if err != nil {
		return err
	}
	return clusters.LoadImages(ctx, *name, fs.Args(), os.Stdout)
}

// parseProvider registers --provider on fs, parses args and returns what the chosen provider
// does at the command line, and its name.
func parseProvider(fs *flag.FlagSet, args []string) (cluster.Clusters, string, error) {
	name := fs.String("provider", envOr("GAUNTLET_PROVIDER", cluster.DefaultProvider),
		"cluster provider: "+strings.Join(cluster.Names(), ", ")+" (env GAUNTLET_PROVIDER)")
	_ = fs.Parse(args) // flag.ExitOnError: a bad flag has ended the command
	p, err := cluster.Lookup(*name)
	if err != nil {
		return nil, *name, err
	}
	return p.Clusters, *name, nil
}

// nameFlag registers --name.
func nameFlag(fs *flag.FlagSet) *string {
	return fs.String("name", envOr("GAUNTLET_CLUSTER", cluster.DefaultName), "cluster name (env GAUNTLET_CLUSTER)")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
