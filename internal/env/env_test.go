package env

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoadEmptyIsZero(t *testing.T) {
	c, err := Load(Map(nil))
	if err != nil || !reflect.DeepEqual(c, Config{}) {
		t.Fatalf("Load(empty) = %+v, %v; want the zero Config", c, err)
	}
	if c.Full(DepthReleases) {
		t.Error("an empty environment runs the releases family in its full form")
	}
}

func TestLoadReadsEachKind(t *testing.T) {
	c, err := Load(Map(map[string]string{
		TimeoutScale: "2.5", ProbeRate: "200", VMAccelUsed: "tcg",
		RestartDelay: "250ms", ConfdSerial: "1", Depth: "releases, hold-timer",
		SweepDelays: "0,200ms,1s", ScaleNodes: "10,50", RenderKnobs: "no-passive",
		KeepOnFail: "yes", Programmer: " /bin/p ",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.TimeoutScale != 2.5 || c.ProbeRate != 200 || c.VMAccelUsed != "tcg" {
		t.Errorf("machine knobs: %+v", c)
	}
	if m := c.Machine(); !m.Stalls() || !m.ProbeRateSet || m.Rate() != 200 || m.Scale() != 2.5 {
		t.Errorf("Machine() = %+v", m)
	}
	if c.RestartDelay == nil || *c.RestartDelay != 250*time.Millisecond || c.ConfdSerial == nil || !*c.ConfdSerial || c.ConfdLatency != nil {
		t.Errorf("timing overrides: delay %v serial %v latency %v", c.RestartDelay, c.ConfdSerial, c.ConfdLatency)
	}
	if !c.Full(DepthReleases) || !c.Full(DepthHoldTimer) || c.Full(DepthCollision) {
		t.Errorf("Depth %q: releases and hold-timer full, collision reduced", c.Depth)
	}
	if !reflect.DeepEqual(c.SweepDelays, []time.Duration{0, 200 * time.Millisecond, time.Second}) || !reflect.DeepEqual(c.ScaleNodes, []int{10, 50}) {
		t.Errorf("lists: %v %v", c.SweepDelays, c.ScaleNodes)
	}
	if !c.KeepOnFail || c.Programmer != "/bin/p" || !reflect.DeepEqual(c.RenderKnobs, []string{"no-passive"}) {
		t.Errorf("keep %v programmer %q render %q", c.KeepOnFail, c.Programmer, c.RenderKnobs)
	}
	if full, _ := Load(Map(map[string]string{Depth: "full"})); !full.Full(DepthCollision) || !full.Full(DepthSweep) {
		t.Errorf("%s=full leaves a family reduced", Depth)
	}
}

// A bad value names the variable, the value and what is valid.
func TestLoadErrorNamesVariableAndValid(t *testing.T) {
	for name, bad := range map[string]string{
		TimeoutScale: "0.5", ProbeRate: "fast", VMAccelUsed: "hvf", Tunnel: "gre",
		RenderKnobs: "no-passive,bogus", Timing: "fast", RestartDelay: "-1s",
		KeepOnFail: "maybe", Depth: "deep", Repeat: "0", ScaleNodes: "10,x",
	} {
		_, err := Load(Map(map[string]string{name: bad}))
		if err == nil {
			t.Errorf("%s=%q loaded without an error", name, bad)
			continue
		}
		var valid string
		for _, k := range Knobs() {
			if k.Name == name {
				valid = k.Valid
			}
		}
		if msg := err.Error(); !strings.Contains(msg, name) || !strings.Contains(msg, bad) || !strings.Contains(msg, valid) {
			t.Errorf("%s=%q: error %q does not name the variable, the value and %q", name, bad, msg, valid)
		}
	}
}

func TestRetiredNameNamesReplacement(t *testing.T) {
	if len(Retired) < 4 {
		t.Fatalf("guard: %d retired names, want the four _FULL switches at least", len(Retired))
	}
	for old := range Retired {
		_, err := Load(Map(map[string]string{old: "1"}))
		if err == nil || !strings.Contains(err.Error(), old) || !strings.Contains(err.Error(), Depth) {
			t.Errorf("%s=1: error %v, want one naming it and %s", old, err, Depth)
		}
	}
	// Positive control: unset (or empty) is no error.
	if _, err := Load(Map(map[string]string{"BIRDCAGE_RELEASES_FULL": ""})); err != nil {
		t.Errorf("an empty retired variable: %v", err)
	}
}

// Every field of Config is one knob's, and every knob sets one field.
func TestEveryFieldIsAKnob(t *testing.T) {
	var c Config
	ks := c.knobs()
	typ := reflect.TypeOf(c)
	if len(ks) != typ.NumField() {
		t.Errorf("%d knobs for %d fields of Config", len(ks), typ.NumField())
	}
	seen := map[string]bool{}
	for _, k := range ks {
		if seen[k.Name] || !strings.HasPrefix(k.Name, "BIRDCAGE_") || k.Doc == "" || k.Valid == "" {
			t.Errorf("knob %q: duplicate, misnamed, or without doc or valid values", k.Name)
		}
		seen[k.Name] = true
		f, ok := typ.FieldByName(fieldOf(k.Name))
		if !ok {
			t.Errorf("knob %s: no field %s", k.Name, fieldOf(k.Name))
			continue
		}
		before := reflect.ValueOf(c).FieldByIndex(f.Index).Interface()
		for _, v := range sample(f.Type) {
			if err := k.set(v); err == nil {
				break
			}
		}
		if reflect.DeepEqual(before, reflect.ValueOf(c).FieldByIndex(f.Index).Interface()) {
			t.Errorf("knob %s does not set field %s", k.Name, f.Name)
		}
	}
	if !seen[Depth] {
		t.Error("guard: the table has no depth knob")
	}
}

// fieldOf is the Config field a knob's constant is named like: the
// constant names are the field names.
func fieldOf(name string) string {
	for _, k := range namesByConst() {
		if k[1] == name {
			return k[0]
		}
	}
	return ""
}

// namesByConst parses names.go: the constant and its value.
func namesByConst() [][2]string {
	f, err := parser.ParseFile(token.NewFileSet(), "names.go", nil, 0)
	if err != nil {
		panic(err)
	}
	var out [][2]string
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Values) == 1 {
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				out = append(out, [2]string{vs.Names[0].Name, strings.Trim(lit.Value, `"`)})
			}
		}
		return true
	})
	return out
}

func sample(t reflect.Type) []string {
	switch t.String() {
	case "string", "[]string":
		return []string{"kvm", "kernel", "no-passive", "full", "realistic", "delete-first", "fail", "0", "x"}
	case "zero", "float64", "int", "[]int":
		return []string{"3"}
	}
	return []string{"1s", "1", "3"}
}

// docs/knobs.md is Markdown() as committed: regenerate with
// `go generate ./internal/env`.
func TestKnobsDocIsCurrent(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "knobs.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != Markdown() {
		t.Fatal("docs/knobs.md is stale: run go generate ./internal/env and commit it")
	}
	if !strings.Contains(string(b), "`"+Depth+"`") {
		t.Fatal("guard: docs/knobs.md does not list " + Depth)
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs(".")
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}
