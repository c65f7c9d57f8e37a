// Command birdcage-programmer is birdcage's Felix-equivalent route
// programmer: one process per node, started inside the node's network
// namespace. Its flags, exit codes and status file are the process contract
// documented in dataplane/programmer.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/birdcage/birdcage/dataplane/programmer"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/monoclock"
)

// started is the process's start as early as Go lets us read it (package
// initialisation, after the runtime's): the anchor of the restart profile.
var started = monoclock.Now()

func main() { os.Exit(run()) }

func run() int {
	// The process's edge: the environment's knobs are its flags' defaults
	// (a supervisor sets them rather than the flags, so a user's own
	// programmer binary, which may not know the flags, still starts).
	cfg, err := env.LoadOS()
	if err != nil {
		fmt.Fprintf(os.Stderr, "birdcage-programmer: %v\n", err)
		return programmer.ExitUsage
	}
	fs := flag.NewFlagSet("birdcage-programmer", flag.ContinueOnError)
	node := fs.String("node", "", "this node's name in the datastore (required)")
	dir := fs.String("datastore", "", "datastore directory (required)")
	release := fs.String("release", string(config.R333), "release profile: "+config.ReleaseList())
	status := fs.String("status", "", "status file, rewritten atomically after every sync")
	logFormat := fs.String("log-format", "text", "log format: json | text")
	logLevel := fs.String("log-level", "info", "log level: debug | info | warn | error")
	tunnel := fs.String("tunnel-device", "tunl0", "IPIP tunnel device")
	multipath := fs.Bool("noencap-multipath-via-gateways", false,
		"NOT Felix's behaviour: program indirectly connected no-encap destinations multipath over every uplink gateway")
	writeOrder := fs.String("write-order", cfg.ProgrammerWriteOrder,
		"emulation knob: delete-first | replace-first (default $"+env.ProgrammerWriteOrder+", else the release's: delete-first)")
	deleteNamesProto := fs.Bool("delete-names-protocol", cfg.ProgrammerDeleteNamesProtocol,
		"emulation knob: deletes name the route's protocol, not Felix's wildcard 0 (default $"+env.ProgrammerDeleteNamesProtocol+"=1)")
	writeWindow := fs.Int("write-window", cfg.ProgrammerWriteWindow,
		"emulation knob: route requests in flight at once, 0 = the release's (1, as Felix); e.g. 256 pipelines (default $"+env.ProgrammerWriteWindow+")")
	ipv4Metric := fs.Int("ipv4-metric", cfg.ProgrammerIPv4Metric,
		"what-if knob: the metric of the IPv4 routes written; 0 as Felix releases it, 1024 as Calico PR #13856 proposes (default $"+env.ProgrammerIPv4Metric+", else 0)")
	noTunnelMTU := fs.Bool("no-tunnel-mtu", cfg.ProgrammerNoTunnelMTU,
		"emulation knob: write no MTU on IPIP routes (Felix writes host MTU - 20) (default $"+env.ProgrammerNoTunnelMTU+"=1)")
	takeoverGap := fs.Duration("takeover-gap", cfg.ProgrammerTakeoverGap,
		"FAULT INJECTION, not Felix: delete a route being taken over and write our own this long after (default $"+env.ProgrammerTakeoverGap+", else 0: off)")
	noBIRDCleanup := fs.Bool("no-bird-cleanup", cfg.ProgrammerNoBIRDCleanup,
		"FAULT INJECTION, not Felix: never claim (so never clean up) BIRD's persisted routes via the tunnel device (default $"+env.ProgrammerNoBIRDCleanup+"=1)")
	startupDelay := fs.Duration("startup-delay", cfg.ProgrammerStartupDelay,
		"restart profile: do not program before this long after process start (default $"+env.ProgrammerStartupDelay+", else 0)")
	perRoute := fs.Duration("resync-delay-per-route", cfg.ProgrammerResyncDelayPerRoute,
		"restart profile: add this per desired route, a modelled full datastore resync (default $"+env.ProgrammerResyncDelayPerRoute+", else 0)")
	if err := fs.Parse(os.Args[1:]); errors.Is(err, flag.ErrHelp) {
		return programmer.ExitOK
	} else if err != nil {
		return programmer.ExitUsage
	}
	usage := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "birdcage-programmer: "+format+"\n", args...)
		fs.Usage()
		return programmer.ExitUsage
	}
	if *node == "" || *dir == "" {
		return usage("--node and --datastore are required")
	}
	if *startupDelay < 0 || *perRoute < 0 {
		return usage("--startup-delay and --resync-delay-per-route must not be negative")
	}
	if *writeWindow < 0 {
		return usage("--write-window must not be negative")
	}
	if *ipv4Metric < 0 || *ipv4Metric > 1<<32-1 {
		return usage("--ipv4-metric %d: must be 0..4294967295 (0 as released, 1024 as Calico PR #13856 proposes)", *ipv4Metric)
	}
	if *writeOrder != "" {
		if _, ok := config.ParseWriteOrder(*writeOrder); !ok {
			return usage("--write-order %q: valid orders are delete-first, replace-first", *writeOrder)
		}
	}
	rel, err := config.ParseRelease(*release)
	if err != nil {
		return usage("--release: %v", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usage("--log-level %q: valid levels are debug, info, warn, error", *logLevel)
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch *logFormat {
	case "json":
		h = slog.NewJSONHandler(os.Stderr, hopts)
	case "text":
		h = slog.NewTextHandler(os.Stderr, hopts)
	default:
		return usage("--log-format %q: valid formats are json, text", *logFormat)
	}
	log := slog.New(h).With("component", "programmer")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err = programmer.Run(ctx, programmer.Options{
		Node: *node, DatastoreDir: *dir, Release: rel, StatusFile: *status, Log: log,
		TunnelDevice: *tunnel, NoEncapMultipathViaGateways: *multipath,
		Restart:     programmer.RestartProfile{StartupDelay: *startupDelay, ResyncDelayPerRoute: *perRoute},
		StartedMono: started,
		Knobs: programmer.Knobs{WriteOrder: *writeOrder, DeleteNamesProtocol: *deleteNamesProto, NoTunnelMTU: *noTunnelMTU,
			WriteWindow: *writeWindow, TakeoverGap: *takeoverGap, IPv4Metric: *ipv4Metric, NoBIRDCleanup: *noBIRDCleanup},
	})
	code := programmer.ExitCode(err)
	if err != nil && code != programmer.ExitConfigChanged {
		log.Error("programmer failed", "err", err)
	}
	return code
}
