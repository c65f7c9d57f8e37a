// This opt-in root test (BIRDCAGE_PERF=1) measures the programmer process at
// 10,000 remote-block routes: time from start to all routes programmed, and
// its resident memory once they are.
package programmer_test

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/programmer"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/testenv"
)

func TestPerfDaemon10kRSS(t *testing.T) {
	if !testenv.Env().Perf {
		t.Skip("set " + env.Perf + "=1 to measure the programmer at 10k routes")
	}
	nd := newNode(t)
	bin := programmerBinary(t)
	dir := nd.r.Path("datastore")
	status := nd.r.Path("status.json")
	st, err := datastore.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	const n, nodes = 10000, 100
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.Put(datastore.KindIPPool, "ipip", datastore.IPPool{CIDR: "10.64.0.0/10", IPIPMode: "Always"}))
	must(st.Put(datastore.KindNode, "node-1", datastore.Node{IPv4Address: "10.0.1.11/24"}))
	for i := range nodes {
		must(st.Put(datastore.KindNode, fmt.Sprintf("node-%d", i+2), datastore.Node{IPv4Address: fmt.Sprintf("10.0.1.%d/24", 12+i)}))
	}
	for i := range n {
		v := uint32(10)<<24 | uint32(64)<<16 + uint32(i)*64
		a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		must(st.Put(datastore.KindBlockAffinity, fmt.Sprintf("b%05d", i),
			datastore.BlockAffinity{CIDR: netip.PrefixFrom(a, 26).String(), Node: fmt.Sprintf("node-%d", i%nodes+2)}))
	}
	start := time.Now()
	p := nd.start(t, bin, dir, status)
	eventually(t, 60*time.Second, "10k routes programmed", func() string {
		s, err := programmer.ReadStatus(status)
		if err != nil || s.RoutesOwned != n {
			return fmt.Sprintf("status %+v %v", s, err)
		}
		return ""
	})
	elapsed := time.Since(start)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var rss, hwm string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			hwm = strings.TrimSpace(v)
		}
	}
	t.Logf("programmer at %d routes: start to all programmed %v (includes reading %d datastore files); RSS %s, peak RSS %s",
		n, elapsed, n+nodes+2, rss, hwm)
}
