package main

import "github.com/spf13/cobra"

// extraCommands are the commands that drive whole clusters (run, report);
// they arrive with the harness.
func extraCommands(_ *bool) []*cobra.Command { return nil }
