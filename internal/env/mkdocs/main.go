// Command mkdocs writes docs/knobs.md from internal/env's Knobs
// (go generate ./internal/env).
package main

import (
	"fmt"
	"os"

	"github.com/birdcage/birdcage/internal/env"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkdocs docs/knobs.md")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], []byte(env.Markdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "mkdocs:", err)
		os.Exit(1)
	}
}
