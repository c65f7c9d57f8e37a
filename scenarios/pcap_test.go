package scenarios_test

// Packet captures for a person debugging a handover: with
// $BIRDCAGE_PCAP=1 (`birdcage run --pcap`) every cluster a spec starts
// captures the probes crossing each node's uplinks (and tunl0) from its
// first probe session to the spec's end, into
// artifacts/<spec>/pcap-<run>/NODE-IFACE.pcap; the spec's row lists the
// files (the HTML report links them).

import (
	"fmt"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/report/results"
)

// armed is the running spec's clusters with captures armed.
var armed []*harness.Cluster

var _ = BeforeEach(func() { armed = nil })

// armCaptures arms c's captures when they were asked for.
func armCaptures(c *harness.Cluster) {
	GinkgoHelper()
	if !cfg.Pcap {
		return
	}
	dir := filepath.Join(results.ArtifactsDir(cfg.Artifacts), slug(CurrentSpecReport().FullText()), "pcap-"+c.Run.ID)
	if err := c.Captures().Arm(dir); err != nil {
		Fail(err.Error())
	}
	armed = append(armed, c)
}

// The captures end with the spec's body (before teardown, so the files are
// complete) and go into its row.
var _ = JustAfterEach(func() {
	var files []results.CaptureFile
	for _, c := range armed {
		fs, err := c.Captures().Stop(results.ArtifactsDir(cfg.Artifacts))
		if err != nil {
			AddReportEntry("packet captures", err.Error())
			fmt.Printf("[birdcage] warning: %v\n", err)
		}
		files = append(files, fs...)
	}
	armed = nil
	if len(files) == 0 {
		return
	}
	if registered == nil {
		registered = &results.ScenarioResult{}
	}
	registered.Captures = files
	var total int64
	for _, f := range files {
		total += f.Packets
	}
	fmt.Printf("[birdcage] packet captures: %d files, %d probe packets, in %s\n", len(files), total, filepath.Dir(filepath.Join(results.ArtifactsDir(cfg.Artifacts), files[0].Path)))
})
