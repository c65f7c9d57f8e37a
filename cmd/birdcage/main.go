// Command birdcage brings up cluster topologies in network namespaces, shows
// them, runs commands inside them, runs the headline scenarios and removes
// what a killed run left behind.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/vishvananda/netlink"

	"github.com/birdcage/birdcage/internal/kroute/nlroute"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/topo"
)

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	root := &cobra.Command{
		Use:           "birdcage",
		Short:         "Route-handover test harness: clusters in network namespaces, real BIRD, real route programmers",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// The one root check: a command that needs root is marked by
	// requireRoot, and is refused here before it runs.
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := loadEnv(); err != nil {
			return err
		}
		if cmd.Annotations[needsRootKey] != "" {
			return needRoot()
		}
		return nil
	}
	var jsonOut bool
	root.PersistentFlags().BoolVar(&jsonOut, "json", false, "machine-readable output")
	root.AddCommand(clusterUp(upCmd(&jsonOut)), clusterDown(downCmd()), statusCmd(&jsonOut), clusterRoutes(routesCmd(&jsonOut), &jsonOut), execCmd(), cleanCmd(&jsonOut), featuresCmd(&jsonOut))
	root.AddCommand(resultsCommands(&jsonOut)...)
	root.AddCommand(clusterCommands(&jsonOut)...)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "birdcage:", err)
		os.Exit(1)
	}
}

const needsRootKey = "birdcage.needs-root"

// requireRoot marks c as a command that needs root (network namespaces,
// netlink, the control socket); the root command refuses it otherwise.
func requireRoot(c *cobra.Command) *cobra.Command {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[needsRootKey] = "yes"
	return c
}

func needRoot() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, netlink): run with sudo")
	}
	return nil
}

func upCmd(jsonOut *bool) *cobra.Command {
	var topology string
	var keep bool
	c := &cobra.Command{
		Use:         "up",
		Annotations: map[string]string{needsRootKey: "yes"},
		Short:       "Build a topology; with --keep leave it up, else tear it down on Ctrl-C",
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := topo.Resolve(topology)
			if err != nil {
				return err
			}
			r, err := run.New()
			if err != nil {
				return err
			}
			r.CloseOnSignal()
			defer r.Close()
			n, err := topo.Build(cmd.Context(), t, r, topo.Options{})
			if err != nil {
				return err
			}
			if err := n.WriteManifest(keep); err != nil {
				return err
			}
			m := n.Manifest()
			if err := printStatus(&m, *jsonOut); err != nil {
				return err
			}
			if keep {
				if err := r.Keep(); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "\nrun %s is up. Try: birdcage exec %s -- ip route; remove it with: birdcage down %s\n", r.ID, n.Nodes[0].Name, r.ID)
				return nil
			}
			fmt.Fprintf(os.Stderr, "\nrun %s is up; Ctrl-C tears it down.\n", r.ID)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			<-ctx.Done()
			return nil
		},
	}
	c.Flags().StringVarP(&topology, "topology", "t", "noencap", "built-in name ("+strings.Join(topo.Builtins(), ", ")+"), a YAML file, or generated:nodes=N[,fabric=l2|dualtor][,racks=R][,rr=K][,pool=noencap|ipip][,block=B][,workloads=W]")
	c.Flags().BoolVar(&keep, "keep", false, "leave the topology up after exit")
	return c
}

func downCmd() *cobra.Command {
	return &cobra.Command{
		Use:         "down [RUN]",
		Annotations: map[string]string{needsRootKey: "yes"},
		Short:       "Remove a topology left up with --keep (the only one, or RUN)",
		Args:        cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			m, err := findRun(args)
			if err != nil {
				return err
			}
			rep, err := run.Clean(run.CleanOptions{RunID: m.RunID, Force: true})
			fmt.Printf("run %s removed: %d namespaces, %d processes, %d containers\n", m.RunID, len(rep.Namespaces), len(rep.Processes), len(rep.Containers))
			return err
		},
	}
}

// findRun returns the manifest of the named run, or of the only run up.
func findRun(args []string) (*topo.Manifest, error) {
	if len(args) == 1 {
		m, err := topo.ReadManifest(filepath.Join(run.StateRoot, args[0], "manifest.json"))
		if err != nil {
			return nil, fmt.Errorf("run %q: no such run up (birdcage status lists them): %w", args[0], err)
		}
		return m, nil
	}
	paths, _ := filepath.Glob(filepath.Join(run.StateRoot, "*", "manifest.json"))
	switch len(paths) {
	case 0:
		return nil, errors.New("no run is up: start one with birdcage up --keep")
	case 1:
		return topo.ReadManifest(paths[0])
	}
	var ids []string
	for _, p := range paths {
		ids = append(ids, filepath.Base(filepath.Dir(p)))
	}
	return nil, fmt.Errorf("several runs are up (%s): name one", strings.Join(ids, ", "))
}

// onRun gives c a --run flag, requires root, and hands fn the manifest of
// the named run (or of the only run up).
func onRun(c *cobra.Command, fn func(m *topo.Manifest, args []string) error) *cobra.Command {
	var runID string
	c.Flags().StringVar(&runID, "run", "", "run ID (default: the only run up)")
	requireRoot(c)
	c.RunE = func(_ *cobra.Command, args []string) error {
		var ids []string
		if runID != "" {
			ids = []string{runID}
		}
		m, err := findRun(ids)
		if err != nil {
			return err
		}
		return fn(m, args)
	}
	return c
}

func statusCmd(jsonOut *bool) *cobra.Command {
	return onRun(&cobra.Command{
		Use:   "status",
		Short: "Show a run's nodes, interfaces, addresses and routes",
		Args:  cobra.NoArgs,
	}, func(m *topo.Manifest, _ []string) error { return printStatus(m, *jsonOut) })
}

type nsStatus struct {
	Name       string   `json:"name"`
	Kind       string   `json:"kind"`
	NetNS      string   `json:"netns"`
	Interfaces []string `json:"interfaces"`
	Routes     []string `json:"routes"`
}

func printStatus(m *topo.Manifest, asJSON bool) error {
	var out []nsStatus
	add := func(kind, name string) {
		s := nsStatus{Name: name, Kind: kind, NetNS: m.Namespaces[name]}
		s.Interfaces, s.Routes = inspect(m, name)
		out = append(out, s)
	}
	for _, sw := range m.Topology.Switches {
		add("switch", sw.Name)
	}
	for _, r := range m.Topology.Routers {
		add("router", r.Name)
	}
	for _, n := range m.Topology.Nodes {
		add("node", n.Name)
		for i := range n.Workloads {
			add("workload", fmt.Sprintf("%s-w%d", n.Name, i))
		}
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"run": m.RunID, "topology": m.Topology.Name, "namespaces": out})
	}
	fmt.Printf("run %s  topology %s\n", m.RunID, m.Topology.Name)
	for _, s := range out {
		if s.Kind == "switch" {
			continue
		}
		fmt.Printf("\n%s %s  (%s)\n", s.Kind, s.Name, s.NetNS)
		for _, i := range s.Interfaces {
			fmt.Printf("  if    %s\n", i)
		}
		for _, r := range s.Routes {
			fmt.Printf("  route %s\n", r)
		}
	}
	return nil
}

// inspect lists a namespace's interfaces with addresses and its main-table
// routes, one line each, in `ip` style.
func inspect(m *topo.Manifest, name string) (ifaces, routes []string) {
	n, err := m.Open(name)
	if err != nil {
		return []string{"error: " + err.Error()}, nil
	}
	defer n.Close()
	h, err := nsutil.Handle(n)
	if err != nil {
		return []string{"error: " + err.Error()}, nil
	}
	defer h.Close()
	links, err := nsutil.Links(h)
	if err != nil {
		ifaces = append(ifaces, "error: "+err.Error())
	}
	names := map[int]string{}
	for _, l := range links {
		a := l.Attrs()
		names[a.Index] = a.Name
		if a.Name == "lo" && a.OperState != netlink.OperUp && len(links) > 1 {
			continue
		}
		addrs, err := nsutil.Addrs(h, l, netlink.FAMILY_ALL)
		if err != nil {
			ifaces = append(ifaces, fmt.Sprintf("%s: error: %v", a.Name, err))
			continue
		}
		var as []string
		for _, ad := range addrs {
			if ad.IP.IsLinkLocalUnicast() || ad.IP.IsLoopback() {
				continue
			}
			as = append(as, ad.IPNet.String())
		}
		state := "down"
		if a.Flags&net.FlagUp != 0 {
			state = "up"
		}
		ifaces = append(ifaces, fmt.Sprintf("%-16s %-6s %-5s %s", a.Name, l.Type(), state, strings.Join(as, " ")))
	}
	rs, err := nsutil.Routes(h, netlink.FAMILY_ALL, nil, 0)
	if err != nil {
		routes = append(routes, "error: "+err.Error())
	}
	for _, r := range rs {
		if r.Dst != nil && r.Dst.IP.IsLinkLocalUnicast() {
			continue
		}
		routes = append(routes, nlroute.FromNetlink(r, nlroute.DevNames(names)).String())
	}
	sort.Strings(routes)
	return ifaces, routes
}

func routesCmd(jsonOut *bool) *cobra.Command {
	return onRun(&cobra.Command{
		Use:   "routes NODE",
		Short: "Show the main-table routes of one node (or router, or workload)",
		Args:  cobra.ExactArgs(1),
	}, func(m *topo.Manifest, args []string) error {
		if _, ok := m.Namespaces[args[0]]; !ok {
			return fmt.Errorf("run %s has no node, router or workload named %q; it has %s", m.RunID, args[0], strings.Join(namespaceNames(m), ", "))
		}
		_, routes := inspect(m, args[0])
		if *jsonOut {
			return json.NewEncoder(os.Stdout).Encode(routes)
		}
		for _, r := range routes {
			fmt.Println(r)
		}
		return nil
	})
}

func execCmd() *cobra.Command {
	return onRun(&cobra.Command{
		Use:   "exec NODE -- CMD [ARGS...]",
		Short: "Run a command inside a node's (router's, workload's) network namespace",
		Args:  cobra.MinimumNArgs(2),
	}, func(m *topo.Manifest, args []string) error {
		path, ok := m.Namespaces[args[0]]
		if !ok {
			return fmt.Errorf("run %s has no node, router or workload named %q; it has %s", m.RunID, args[0], strings.Join(namespaceNames(m), ", "))
		}
		// nsenter-free: `ip netns exec` handles /sys and /etc/netns.
		cmd := exec.CommandContext(context.Background(), "ip", append([]string{"netns", "exec", filepath.Base(path)}, args[1:]...)...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				os.Exit(ee.ExitCode())
			}
			return err
		}
		return nil
	})
}

func cleanCmd(jsonOut *bool) *cobra.Command {
	var opts run.CleanOptions
	c := &cobra.Command{
		Use:         "clean",
		Annotations: map[string]string{needsRootKey: "yes"},
		Short:       "Remove what killed runs left behind (namespaces, processes, containers, state and temp dirs)",
		Args:        cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			rep, err := run.Clean(opts)
			if *jsonOut {
				_ = json.NewEncoder(os.Stdout).Encode(rep)
				return err
			}
			verb := "removed"
			if opts.DryRun {
				verb = "would remove"
			}
			fmt.Printf("%s %d runs: %d namespaces, %d processes, %d containers, %d dirs\n", verb, len(rep.Runs), len(rep.Namespaces), len(rep.Processes), len(rep.Containers), len(rep.Dirs))
			if len(rep.Skipped) > 0 {
				fmt.Printf("left alone (owner still running or kept; --force, or birdcage down): %s\n", strings.Join(rep.Skipped, ", "))
			}
			return err
		},
	}
	c.Flags().StringVar(&opts.RunID, "run", "", "only this run")
	c.Flags().BoolVar(&opts.Force, "force", false, "also runs whose owner is alive or that were kept")
	c.Flags().BoolVar(&opts.DryRun, "dry-run", false, "report only")
	return c
}

func featuresCmd(jsonOut *bool) *cobra.Command {
	return &cobra.Command{
		Use:         "features",
		Annotations: map[string]string{needsRootKey: "yes"},
		Short:       "Say which kernel features birdcage's topologies can use here (ipip: the kernel's module; tunnel: how tunl0 is made); exits 0 either way",
		Args:        cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			r, err := run.New()
			if err != nil {
				return err
			}
			defer r.Close()
			f, err := topo.DetectFeatures(r)
			if err != nil {
				return err
			}
			if *jsonOut {
				return json.NewEncoder(os.Stdout).Encode(map[string]any{"ipip": f.KernelIPIP, "tunnel": topo.ChosenTunnel()})
			}
			fmt.Printf("ipip=%v\ntunnel=%s\n", f.KernelIPIP, topo.ChosenTunnel())
			return nil
		},
	}
}

func namespaceNames(m *topo.Manifest) []string {
	names := make([]string, 0, len(m.Namespaces))
	for n := range m.Namespaces {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
