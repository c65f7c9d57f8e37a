package scenarios_test

// --keep-on-fail, held in place against real clusters: the test binary is
// run again as a child with BIRDCAGE_SELFTEST=keep (which registers two
// specs that each start a noencap cluster and then fail) and
// BIRDCAGE_KEEP_ON_FAIL=1. After the child has exited, the first failed
// spec's cluster must still be up under its run prefix — namespaces, BIRD
// with its sessions established, its remote blocks programmed — and the
// commands the child printed (`birdcage exec`, `routes`) must work; `birdcage
// clean` must leave it alone and `birdcage down` must remove all of it.
// Control: the second failed spec's cluster (one is kept, not every one)
// is gone when the child ends.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

const selftestKeepMsg = "selftest: fails on purpose with its cluster up"

var _ = func() bool {
	if scenariotest.Config.Selftest != "keep" {
		return false
	}
	Describe("Keep-on-fail self-test", Label("selftest-keep"), func() {
		for _, which := range []string{"first", "second"} {
			It("starts a cluster, then fails ("+which+")", func(ctx SpecContext) {
				c := scenariotest.StartCluster(ctx, "noencap", harness.Options{})
				fmt.Printf("[birdcage] selftest-keep: %s run %s\n", which, c.Run.ID)
				Expect(1).To(Equal(2), selftestKeepMsg)
			})
		}
	})
	return true
}()

var (
	keptLine     = regexp.MustCompile(`\[birdcage\] kept: run ([0-9a-f]{6}) is kept up`)
	selftestRun  = regexp.MustCompile(`\[birdcage\] selftest-keep: (first|second) run ([0-9a-f]{6})`)
	keptCommands = regexp.MustCompile(`\[birdcage\] kept:   (birdcage (?:exec|routes) .*)`)
	keptBirdc    = regexp.MustCompile(`\[birdcage\] kept:   birdc -s (\S+) show protocols`)
)

func TestKeepOnFail(t *testing.T) {
	if scenariotest.Config.Selftest != "" {
		t.Skipf("%s is set: this is (or could be) the child run of a self-test", selftestEnv)
	}
	testenv.NeedRoot(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "birdcage")
	build := exec.Command("go", "build", "-o", bin, "./cmd/birdcage")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/birdcage: %v\n%s", err, b)
	}
	cli := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		b, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		return string(b), err
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestScenarios$", "-ginkgo.no-color", "-ginkgo.label-filter=selftest-keep")
	cmd.Env = append(os.Environ(), env.Set(selftestEnv, "keep"), env.Set(env.KeepOnFail, "1"), env.Set(env.Artifacts, t.TempDir()))
	b, _ := cmd.CombinedOutput()
	out := string(b)
	runs := map[string]string{}
	for _, m := range selftestRun.FindAllStringSubmatch(out, -1) {
		runs[m[1]] = m[2]
	}
	// Whatever happens below, nothing the child kept outlives this test.
	t.Cleanup(func() {
		for _, id := range runs {
			_, _ = run.Clean(run.CleanOptions{RunID: id, Force: true})
		}
		if t.Failed() {
			t.Logf("child output:\n%s", defuse(out))
		}
	})
	if !strings.Contains(out, "0 Passed | 2 Failed") || runs["first"] == "" || runs["second"] == "" {
		t.Fatalf("guard: the child should start two clusters and fail both specs; runs %v", runs)
	}
	m := keptLine.FindStringSubmatch(out)
	if m == nil || m[1] != runs["first"] {
		t.Fatalf("the child should keep the first failed spec's run %s, said %v", runs["first"], m)
	}
	if want := "run " + runs["first"] + " is kept already"; !strings.Contains(out, want) {
		t.Errorf("the second failure should say %q", want)
	}
	first, second := runs["first"], runs["second"]

	// 1. The kept run is up after its owner exited: namespaces, processes.
	if n := namespacesOf(t, first); n == 0 {
		t.Fatalf("run %s: no namespace left after the child exited", first)
	}
	if n := namespacesOf(t, second); n != 0 {
		t.Errorf("control: the second failed spec's run %s left %d namespaces (only one run is kept)", second, n)
	}
	if !run.Alive(first) {
		t.Errorf("a kept run must count as alive, so clean leaves it alone")
	}

	// 2. The printed commands work and show a cluster that programs
	// routes: node-1 has routes to the other nodes' blocks.
	cmds := keptCommands.FindAllStringSubmatch(out, -1)
	if len(cmds) < 2 {
		t.Fatalf("the child printed %d ways in, want exec and routes", len(cmds))
	}
	for _, c := range cmds {
		args := strings.Fields(strings.TrimPrefix(c[1], "birdcage "))
		got, err := cli(args...)
		if err != nil {
			t.Errorf("birdcage %s: %v\n%s", strings.Join(args, " "), err, got)
			continue
		}
		// A remote block's route, by whichever owner the release gives it.
		if !strings.Contains(got, " via ") || !(strings.Contains(got, "proto bird") || strings.Contains(got, "proto 80")) {
			t.Errorf("birdcage %s shows no cluster route on the kept cluster:\n%s", strings.Join(args, " "), got)
		}
	}
	// node-1's BIRD still answers and its sessions are up.
	if m := keptBirdc.FindStringSubmatch(out); m == nil {
		t.Errorf("the child printed no birdc line for node-1's BIRD")
	} else if got, err := exec.Command("birdc", "-s", m[1], "show", "protocols").CombinedOutput(); err != nil || !strings.Contains(string(got), "Established") {
		t.Errorf("birdc -s %s show protocols on the kept cluster: %v\n%s", m[1], err, got)
	}

	// 3. clean (without --force) leaves it; down removes it all.
	if got, err := cli("clean", "--run", first); err != nil || !strings.Contains(got, "left alone") {
		t.Errorf("birdcage clean should leave the kept run alone: %v\n%s", err, got)
	}
	if namespacesOf(t, first) == 0 {
		t.Fatalf("birdcage clean removed the kept run")
	}
	if got, err := cli("down", first); err != nil {
		t.Errorf("birdcage down %s: %v\n%s", first, err, got)
	}
	if n := namespacesOf(t, first); n != 0 {
		t.Errorf("birdcage down left %d namespaces of run %s", n, first)
	}
	if _, err := os.Stat(filepath.Join(run.StateRoot, first)); err == nil {
		t.Errorf("birdcage down left the state dir of run %s", first)
	}
}

// namespacesOf counts the network namespaces carrying run id's prefix.
func namespacesOf(t *testing.T, id string) int {
	t.Helper()
	es, err := os.ReadDir(run.NetnsDir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "bc"+id+"-") {
			n++
		}
	}
	return n
}
