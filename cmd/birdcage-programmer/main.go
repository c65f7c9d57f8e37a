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

	"github.com/birdcage/birdcage/dataplane/config"
	"github.com/birdcage/birdcage/dataplane/programmer"
)

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("birdcage-programmer", flag.ContinueOnError)
	node := fs.String("node", "", "this node's name in the datastore (required)")
	dir := fs.String("datastore", "", "datastore directory (required)")
	release := fs.String("release", string(config.R333), "release profile: pre-3.33 | 3.33")
	status := fs.String("status", "", "status file, rewritten atomically after every sync")
	logFormat := fs.String("log-format", "text", "log format: json | text")
	logLevel := fs.String("log-level", "info", "log level: debug | info | warn | error")
	tunnel := fs.String("tunnel-device", "tunl0", "IPIP tunnel device")
	multipath := fs.Bool("noencap-multipath-via-gateways", false,
		"NOT Felix's behaviour: program indirectly connected no-encap destinations multipath over every uplink gateway")
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
	})
	code := programmer.ExitCode(err)
	if err != nil && code != programmer.ExitConfigChanged {
		log.Error("programmer failed", "err", err)
	}
	return code
}
