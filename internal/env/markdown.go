package env

import (
	"fmt"
	"slices"
	"strings"
)

// Markdown is docs/knobs.md: every knob by group, then the retired names.
func Markdown() string {
	var b strings.Builder
	b.WriteString("# Environment knobs\n\n")
	b.WriteString("<!-- Generated from internal/env (go generate ./internal/env); edit the Knobs table there, not this file. -->\n\n")
	b.WriteString("Every `BIRDCAGE_*` variable birdcage, its tests and `ci/` read. An empty value is unset. A bad value stops the process at its start with the variable's name and what is valid (`env.Load`), before anything is built.\n")
	ks := Knobs()
	for _, g := range Groups {
		b.WriteString("\n## " + g + "\n\n| variable | default | valid | what it does |\n|---|---|---|---|\n")
		for _, k := range ks {
			if k.Group == g {
				fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.Name, cell(k.Default), cell(k.Valid), cell(k.Doc))
			}
		}
	}
	b.WriteString("\n## Retired\n\nSetting one of these is an error naming its replacement.\n\n| variable | set instead |\n|---|---|\n")
	for _, old := range slices.Sorted(mapsKeys(Retired)) {
		fmt.Fprintf(&b, "| `%s` | `%s` |\n", old, Retired[old])
	}
	return b.String()
}

func cell(s string) string {
	if s == "" {
		return "—"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
