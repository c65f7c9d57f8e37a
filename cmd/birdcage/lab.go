package main

import (
	"fmt"
	"path/filepath"

	"github.com/birdcage/birdcage/harness/lab"
	"github.com/birdcage/birdcage/internal/env"
)

// labRun is what `birdcage run --lab MANIFEST` adds: the manifest checked
// here (a bad one fails before the suite starts, naming file and field),
// $BIRDCAGE_LAB for the suite, and a filter narrowed to the lab specs
// (the built-in target's specs do not run against a lab).
func labRun(manifest, filter string, filterGiven bool) (vars []string, _ string, _ error) {
	if manifest == "" {
		return nil, filter, nil
	}
	if manifest != "handmade" && manifest != "handmade-runc" {
		if _, err := lab.Load(manifest); err != nil {
			return nil, "", err
		}
		abs, err := filepath.Abs(manifest)
		if err != nil {
			return nil, "", err
		}
		manifest = abs
	}
	vars = []string{env.Set(env.Lab, manifest)}
	if !filterGiven {
		return vars, "lab", nil
	}
	return vars, fmt.Sprintf("lab && (%s)", filter), nil
}
