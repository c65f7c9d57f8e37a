package main

import (
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/topo"
)

// cfg is the process's environment knobs, loaded by the root command before
// any subcommand runs (loadEnv): the CLI's edge. Nothing below it reads
// the environment.
var cfg env.Config

// loadEnv loads cfg; a bad value stops the command naming the variable and
// what is valid.
func loadEnv() error {
	c, err := env.LoadOS()
	if err != nil {
		return err
	}
	cfg = c
	topo.ForceTunnel(cfg.Tunnel)
	return nil
}
