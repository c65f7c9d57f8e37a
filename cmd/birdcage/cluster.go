package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/dataplane/caliconode"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/control"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/topo"
)

// The live cluster: `up --cluster` runs harness.Start under a supervisor
// that serves harness/control on a socket in the run's state dir; the verbs
// below are that protocol's clients.

const (
	// readyFDEnv tells a re-executed `up --cluster` (--detach) which fd
	// to report readiness (or its error) on, as one JSON line.
	readyFDEnv = env.SupervisorReadyFD
	// logEnv is the log file the detached supervisor writes to; it moves
	// it into the run's state dir once the run exists.
	logEnv = env.SupervisorLog
	// supervisorLog is its name there.
	supervisorLog = "supervisor.log"
)

// readyMsg is what the detached supervisor reports to the `up` that
// started it.
type readyMsg struct {
	Info  *control.Info `json:"info,omitempty"`
	Error string        `json:"error,omitempty"`
	Log   string        `json:"log,omitempty"`
}

// clusterUp gives `up` the --cluster mode.
func clusterUp(up *cobra.Command) *cobra.Command {
	var cluster, detach, allowUnknown bool
	var release, calico string
	var felix, bgp, nodeCalico []string
	plain := up.RunE
	up.Short = "Build a topology (--cluster: the whole cluster, programmer and BIRD per node, driven by the verbs)"
	f := up.Flags()
	f.BoolVar(&cluster, "cluster", false, "bring up the whole cluster (datastore, programmer and BIRD per node, ToR BIRDs) under a supervisor the verbs talk to")
	f.StringVar(&release, "release", string(config.R333), "with --cluster: the Calico release every node starts on: "+config.ReleaseList())
	f.StringArrayVar(&felix, "felix", nil, "with --cluster: FelixConfiguration KEY=VALUE (programClusterRoutes, deviceRouteProtocol, routeRefreshInterval); repeatable")
	f.StringArrayVar(&bgp, "bgp", nil, "with --cluster: BGPConfiguration KEY=VALUE (programClusterRoutes, nodeToNodeMeshEnabled, asNumber, bgpEnabled, kernelMetric); repeatable")
	f.StringVar(&calico, "calico", "", "with --cluster: run Calico's own Felix, confd and BIRD on every node from this directory, laid out like the calico/node image's root filesystem, or from this image (calico/node:v3.33.0, exported through docker or podman) (the `calico` flavour; default: birdcage's model)")
	f.StringArrayVar(&nodeCalico, "node-calico", nil, "with --cluster: NODE=DIR runs that node from DIR (NODE= runs the model there); repeatable")
	f.BoolVar(&detach, "detach", false, "with --cluster: run the supervisor in the background and return once the cluster is converged")
	f.BoolVar(&allowUnknown, "allow-unknown", false, "with --cluster: let programClusterRoutes take a value outside the enum (both sides then use their release default)")
	requireRoot(up)
	up.RunE = func(cmd *cobra.Command, args []string) error {
		if !cluster {
			for _, fl := range []string{"release", "felix", "bgp", "detach", "allow-unknown", "calico", "node-calico"} {
				if cmd.Flags().Changed(fl) {
					return fmt.Errorf("--%s needs --cluster", fl)
				}
			}
			return plain(cmd, args)
		}
		if cmd.Flags().Changed("keep") {
			return errors.New("--keep is for a bare topology; a cluster stays up until birdcage down (use --detach to get the shell back)")
		}
		topology, _ := cmd.Flags().GetString("topology")
		t, err := topo.Resolve(topology)
		if err != nil {
			return err
		}
		rel, err := config.ParseRelease(release)
		if err != nil {
			return err
		}
		// Render departures (no passive, direct peers) come from
		// $BIRDCAGE_RENDER_KNOBS, as for every cluster a run starts
		// (harness.WithEnv): one way to set them.
		opts := harness.Options{Release: rel, Calico: calico}
		for _, kv := range nodeCalico {
			node, dir, ok := strings.Cut(kv, "=")
			if !ok || node == "" {
				return fmt.Errorf("--node-calico %q: want NODE=DIR (NODE= to run the model there)", kv)
			}
			if opts.NodeCalico == nil {
				opts.NodeCalico = map[string]string{}
			}
			opts.NodeCalico[node] = dir
		}
		if err := (control.Settings{Felix: felix, BGP: bgp, AllowUnknown: allowUnknown}).Apply(&opts.Felix, &opts.BGP); err != nil {
			return err
		}
		if detach {
			return detachSupervisor()
		}
		return supervise(cmd.Context(), t, opts)
	}
	return up
}

// supervise runs the cluster in this process until `birdcage down` (or
// SIGINT/SIGTERM, which the run turns into a teardown).
func supervise(ctx context.Context, t *topo.Topology, opts harness.Options) (err error) {
	var ready *os.File
	if cfg.SupervisorReadyFD != 0 {
		ready = os.NewFile(uintptr(cfg.SupervisorReadyFD), "ready")
		defer ready.Close()
	}
	logPath := cfg.SupervisorLog
	report := func(m readyMsg) {
		if ready != nil {
			m.Log = logPath
			_ = json.NewEncoder(ready).Encode(m)
			ready.Close()
			ready = nil
		}
	}
	defer func() {
		if err != nil {
			report(readyMsg{Error: err.Error()})
		}
	}()
	if opts.Programmer == "" && cfg.Programmer == "" {
		// An installed birdcage ships the programmer next to itself.
		if exe, err := os.Executable(); err == nil {
			if p := filepath.Join(filepath.Dir(exe), "birdcage-programmer"); fileExists(p) {
				opts.Programmer = p
			}
		}
	}
	if opts, err = harness.WithEnv(cfg, opts); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bringing up %s (%d nodes) on release %s...\n", t.Name, len(t.Nodes), opts.Release)
	c, err := harness.Start(ctx, t, opts)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	if logPath != "" {
		// The log lives with the run from now on (same filesystem: the
		// open file moves with it).
		dst := c.Run.Path(supervisorLog)
		if os.Rename(logPath, dst) == nil {
			logPath = dst
		}
	}
	if err := c.Net.WriteManifest(false); err != nil {
		return err
	}
	srv, err := control.Listen(c, c.Run.Path(control.SocketName), slog.Default())
	if err != nil {
		return err
	}
	c.Run.Defer("control socket", srv.Close)
	go func() {
		if err := srv.Serve(); err != nil {
			slog.Error("control socket", "err", err)
		}
	}()
	info := control.InfoOf(c, srv.Path())
	for _, w := range c.Warnings() {
		fmt.Fprintln(os.Stderr, "warning:", w)
	}
	if ready != nil {
		report(readyMsg{Info: &info})
	} else {
		fmt.Println(upBanner(info, ""))
		fmt.Fprintln(os.Stderr, "Ctrl-C (or birdcage down from another shell) removes everything.")
	}
	<-srv.Down()
	fmt.Fprintf(os.Stderr, "run %s removed (birdcage down)\n", c.Run.ID)
	return nil
}

func upBanner(in control.Info, logPath string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %s is up: topology %s, nodes %s", in.Run, in.Topology, strings.Join(in.Nodes, ", "))
	if len(in.Routers) > 0 {
		fmt.Fprintf(&b, ", routers %s", strings.Join(in.Routers, ", "))
	}
	fmt.Fprintf(&b, "; converged in %.0f ms\nsupervisor pid %d, socket %s", in.ConvergedMs, in.PID, in.Socket)
	if logPath != "" {
		fmt.Fprintf(&b, ", log %s", logPath)
	}
	n := "node-1"
	if len(in.Nodes) > 0 {
		n = in.Nodes[0]
	}
	fmt.Fprintf(&b, "\ndrive it: birdcage probe --for 10s | set felix.programClusterRoutes=Enabled bgp.programClusterRoutes=Disabled |\n"+
		"          upgrade %s --to 3.33 | bird %s kill|start | timeline %s | routes %s | birdc %s -- show protocols\n"+
		"remove it: birdcage down %s", n, n, n, n, n, in.Run)
	return b.String()
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// detachSupervisor re-executes this command without --detach in a new
// session, its output in a log file, and waits for it to report the
// cluster converged (or its error).
func detachSupervisor() error {
	if err := os.MkdirAll(run.StateRoot, 0o755); err != nil {
		return err
	}
	logf, err := os.CreateTemp(run.StateRoot, "up-*.log")
	if err != nil {
		return err
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	var args []string
	for _, a := range os.Args[1:] {
		if a != "--detach" && a != "--detach=true" {
			args = append(args, a)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), env.Set(readyFDEnv, "3"), env.Set(logEnv, logf.Name()))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return fmt.Errorf("start the supervisor: %w", err)
	}
	pw.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	line, rerr := bufio.NewReader(pr).ReadBytes('\n')
	var m readyMsg
	if rerr != nil || json.Unmarshal(line, &m) != nil {
		werr := <-exited
		tail, _ := os.ReadFile(logf.Name())
		return fmt.Errorf("the supervisor exited before the cluster was up (%v); its log %s:\n%s", werr, logf.Name(), lastLines(string(tail), 30))
	}
	if m.Error != "" {
		<-exited
		// The run is gone; so goes its log, after its tail is shown.
		tail, _ := os.ReadFile(m.Log)
		_ = os.Remove(m.Log)
		return fmt.Errorf("%s\nthe supervisor's log ended:\n%s", m.Error, lastLines(string(tail), 15))
	}
	fmt.Println(upBanner(*m.Info, m.Log))
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// clusterDown makes `down` ask a cluster's supervisor to tear it down
// (the supervisor owns the processes), then checks that nothing is left.
func clusterDown(down *cobra.Command) *cobra.Command {
	plain := down.RunE
	down.Short = "Remove a cluster (birdcage up --cluster) or a topology left up with --keep (the only one, or RUN)"
	requireRoot(down)
	down.RunE = func(cmd *cobra.Command, args []string) error {
		var id string
		if len(args) == 1 {
			id = args[0]
		} else if ids := control.Runs(); len(ids) > 0 {
			m, err := findRun(args)
			if err != nil {
				return err
			}
			id = m.RunID
		}
		if id == "" || !fileExists(control.Socket(id)) {
			return plain(cmd, args)
		}
		pid := ownerPID(id)
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
		defer stop()
		err := control.Do(ctx, control.Socket(id), control.Request{Verb: "down"}, printLine(false, false))
		if err != nil {
			return err
		}
		// The supervisor exits after its reply; wait for it, then look
		// for anything of the run's that is still there.
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for pid > 0 && unix.Kill(pid, 0) == nil {
			select {
			case <-wctx.Done():
				return fmt.Errorf("run %s: supervisor pid %d still running 30s after down", id, pid)
			case <-time.After(10 * time.Millisecond):
			}
		}
		rep, err := run.Clean(run.CleanOptions{RunID: id, Force: true, DryRun: true})
		if err != nil {
			return err
		}
		if n := len(rep.Namespaces) + len(rep.Processes) + len(rep.Containers) + len(rep.Dirs); n > 0 {
			rep, err = run.Clean(run.CleanOptions{RunID: id, Force: true})
			return errors.Join(fmt.Errorf("run %s left %d namespaces, %d processes, %d containers, %d dirs behind (a bug): removed them",
				id, len(rep.Namespaces), len(rep.Processes), len(rep.Containers), len(rep.Dirs)), err)
		}
		fmt.Printf("run %s is down: supervisor exited, no namespace, process, container or state dir of it left\n", id)
		return nil
	}
	return down
}

func ownerPID(id string) int {
	b, err := os.ReadFile(filepath.Join(run.StateRoot, id, "owner.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// clusterRoutes makes `routes NODE` ask the supervisor (routes grouped by
// owner) when the run is a cluster.
func clusterRoutes(routes *cobra.Command, jsonOut *bool) *cobra.Command {
	plain := routes.RunE
	routes.Short = "Show the main-table routes of one node (grouped by owner when the run is a cluster)"
	requireRoot(routes)
	routes.RunE = func(cmd *cobra.Command, args []string) error {
		runID, _ := cmd.Flags().GetString("run")
		var ids []string
		if runID != "" {
			ids = []string{runID}
		}
		m, err := findRun(ids)
		if err != nil || !fileExists(control.Socket(m.RunID)) {
			return plain(cmd, args)
		}
		return drive(cmd.Context(), m.RunID, control.Request{Verb: "routes", Node: args[0]}, *jsonOut)
	}
	return routes
}

// drive sends one request to a run's supervisor and prints the reply.
func drive(ctx context.Context, runID string, req control.Request, asJSON bool) error {
	sock, err := control.Find(runID)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return control.Do(ctx, sock, req, printLine(asJSON, req.Live))
}

// printLine prints reply lines: events with their time on the run's clock
// (seconds since the cluster's Start), live tables redrawn in place on a
// terminal (a one-line summary otherwise).
func printLine(asJSON, tty bool) func(control.Line) error {
	enc := json.NewEncoder(os.Stdout)
	liveLines := 0
	clearLive := func() {
		if liveLines > 0 {
			fmt.Printf("\x1b[%dA\x1b[J", liveLines)
			liveLines = 0
		}
	}
	return func(l control.Line) error {
		if asJSON {
			return enc.Encode(l)
		}
		switch l.Kind {
		case control.KindEvent:
			clearLive()
			fmt.Printf("%10s  %s\n", fmt.Sprintf("+%.3fs", l.RunMs/1000), l.Text)
		case control.KindLive:
			if tty && l.Text != "" {
				clearLive()
				text := fmt.Sprintf("%10s  %s\n%s", fmt.Sprintf("+%.3fs", l.RunMs/1000), l.Summary, l.Text)
				fmt.Print(text)
				liveLines = strings.Count(text, "\n")
			} else {
				fmt.Printf("%10s  %s\n", fmt.Sprintf("+%.3fs", l.RunMs/1000), l.Summary)
			}
		case control.KindReport:
			clearLive()
			if l.Summary != "" {
				fmt.Printf("%10s  %s\n", fmt.Sprintf("+%.3fs", l.RunMs/1000), l.Summary)
			}
			if l.Text != "" {
				fmt.Println(strings.TrimRight(l.Text, "\n"))
			}
		default:
			clearLive()
			fmt.Println(l.Text)
		}
		return nil
	}
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// verb is a command that drives the cluster of --run (or the only one up).
func verb(c *cobra.Command, jsonOut *bool, build func(cmd *cobra.Command, args []string) (control.Request, error)) *cobra.Command {
	var runID, wait string
	c.Flags().StringVar(&runID, "run", "", "run ID (default: the only cluster up)")
	c.Flags().StringVar(&wait, "wait", "60s", "how long an action waits for the cluster to settle")
	requireRoot(c)
	c.RunE = func(cmd *cobra.Command, args []string) error {
		req, err := build(cmd, args)
		if err != nil {
			return err
		}
		req.Wait = wait
		return drive(cmd.Context(), runID, req, *jsonOut)
	}
	return c
}

// clusterCommands are the verbs that drive a live cluster.
func clusterCommands(jsonOut *bool) []*cobra.Command {
	var to, sig, newProgrammer, newCalico string
	upgrade := verb(&cobra.Command{
		Use:   "upgrade NODE --to RELEASE [--signal KILL|TERM] [--programmer PATH | --calico DIR]",
		Short: "Replace a node's programmer and BIRD with those of a release (Cluster.UpgradeNode), optionally with a programmer build of your own",
		Args:  cobra.ExactArgs(1),
	}, jsonOut, func(_ *cobra.Command, args []string) (control.Request, error) {
		if newProgrammer != "" {
			abs, err := filepath.Abs(newProgrammer)
			if err != nil {
				return control.Request{}, fmt.Errorf("--programmer %q: %w", newProgrammer, err)
			}
			newProgrammer = abs
		}
		if newCalico != "" && !caliconode.IsImageRef(newCalico) {
			abs, err := filepath.Abs(newCalico)
			if err != nil {
				return control.Request{}, fmt.Errorf("--calico %q: %w", newCalico, err)
			}
			newCalico = abs
		}
		return control.Request{Verb: "upgrade", Node: args[0], To: to, Signal: sig, Programmer: newProgrammer, Calico: newCalico}, nil
	})
	upgrade.Flags().StringVar(&to, "to", "", "release to upgrade to: "+config.ReleaseList())
	upgrade.Flags().StringVar(&sig, "signal", "KILL", "signal the old BIRD gets: KILL (a pod deletion) or TERM (BIRD sends Cease)")
	upgrade.Flags().StringVar(&newCalico, "calico", "", "a calico node's new pod runs this image directory or image (a Calico upgrade: every process of the old pod gets --signal, the new image's start)")
	upgrade.Flags().StringVar(&newProgrammer, "programmer", "", "the node runs this programmer binary from the upgrade on (your own build, under the process contract of dataplane/programmer)")

	var allowUnknown bool
	set := verb(&cobra.Command{
		Use:   "set felix.KEY=VALUE|bgp.KEY=VALUE...",
		Short: "Change FelixConfiguration/BGPConfiguration live (both programClusterRoutes together: Cluster.SetProgramClusterRoutes)",
		Args:  cobra.MinimumNArgs(1),
	}, jsonOut, func(_ *cobra.Command, args []string) (control.Request, error) {
		st, err := control.ParseQualified(args, allowUnknown)
		return control.Request{Verb: "set", Settings: st}, err
	})
	set.Flags().BoolVar(&allowUnknown, "allow-unknown", false, "let programClusterRoutes take a value outside the enum")

	var recovery bool
	var birdSig string
	birdVerb := verb(&cobra.Command{
		Use:   "bird NODE kill|start [--recovery] [--signal KILL|TERM]",
		Short: "Kill a node's BIRD (Cluster.KillBIRD) or start it again (Cluster.StartBIRD, -R with --recovery)",
		Args:  cobra.ExactArgs(2),
	}, jsonOut, func(_ *cobra.Command, args []string) (control.Request, error) {
		return control.Request{Verb: "bird", Node: args[0], Action: args[1], Recovery: recovery, Signal: birdSig}, nil
	})
	birdVerb.Flags().BoolVar(&recovery, "recovery", false, "start: with -R (graceful-restart recovery)")
	birdVerb.Flags().StringVar(&birdSig, "signal", "KILL", "kill: KILL or TERM")

	var dur string
	var rate int
	probe := verb(&cobra.Command{
		Use:   "probe [--for 10s] [--rate HZ]",
		Short: "Probe every node pair both ways; a live gap table every second, then the final one",
		Args:  cobra.NoArgs,
	}, jsonOut, func(_ *cobra.Command, _ []string) (control.Request, error) {
		return control.Request{Verb: "probe", For: dur, Rate: rate, Live: isTerminal(os.Stdout) && !*jsonOut}, nil
	})
	probe.Flags().StringVar(&dur, "for", "10s", "how long to probe")
	probe.Flags().IntVar(&rate, "rate", 0, "probes per second per flow (default $"+env.ProbeRate+", else 1000)")

	var all bool
	tl := verb(&cobra.Command{
		Use:   "timeline NODE [PREFIX]",
		Short: "A node's route events since the cluster started, the harness's actions between them, the owner per prefix",
		Args:  cobra.RangeArgs(1, 2),
	}, jsonOut, func(_ *cobra.Command, args []string) (control.Request, error) {
		req := control.Request{Verb: "timeline", Node: args[0], All: all}
		if len(args) == 2 {
			req.Prefix = args[1]
		}
		return req, nil
	})
	tl.Flags().BoolVar(&all, "all", false, "every route, not only those inside the cluster's pools")

	birdc := verb(&cobra.Command{
		Use:   "birdc NODE -- COMMAND...",
		Short: "Run a birdc command on a node's (or router's) BIRD",
		Args:  cobra.MinimumNArgs(2),
	}, jsonOut, func(_ *cobra.Command, args []string) (control.Request, error) {
		return control.Request{Verb: "birdc", Node: args[0], Command: args[1:]}, nil
	})

	info := verb(&cobra.Command{
		Use:   "info",
		Short: "Show a live cluster's run, nodes, releases and supervisor",
		Args:  cobra.NoArgs,
	}, jsonOut, func(_ *cobra.Command, _ []string) (control.Request, error) {
		return control.Request{Verb: "info"}, nil
	})
	return []*cobra.Command{upgrade, set, birdVerb, probe, tl, birdc, info}
}
