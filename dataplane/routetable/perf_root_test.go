// This root test measures the route table against the practical netlink
// limit, `ip -batch`, in the same run: programming 10,000 remote-block
// routes into an empty table (target: within 1.5x of ip -batch) and a resync
// of 10,000 unchanged routes (target: under 100 ms). It is opt-in
// (BIRDCAGE_PERF=1) because the machine's cores are shared.
package routetable

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/route"
)

// remoteBlocks returns n /26 tunnel routes spread over 100 remote nodes.
func remoteBlocks(n int) []route.Route {
	out := make([]route.Route, n)
	base := netip.MustParseAddr("10.64.0.0").As4()
	for i := range n {
		v := uint32(base[0])<<24 | uint32(base[1])<<16 + uint32(i)*64
		a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		gw := netip.AddrFrom4([4]byte{10, 0, 1, byte(12 + i%100)})
		out[i] = route.Route{Dst: netip.PrefixFrom(a, 26), Class: route.ClassIPIPTunnel,
			NextHops: []route.NextHop{{Gateway: gw, Device: "tunl0", OnLink: true}}}
	}
	return out
}

func ipBatch(t testing.TB, tn *testNode, routes []route.Route) time.Duration {
	t.Helper()
	var b strings.Builder
	for _, r := range routes {
		fmt.Fprintf(&b, "route add %s via %s dev tunl0 onlink proto 80\n", r.Dst, r.NextHops[0].Gateway)
	}
	f := filepath.Join(t.TempDir(), "routes.batch")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := exec.Command("ip", "-netns", tn.name, "-batch", f).CombinedOutput()
	d := time.Since(start)
	if err != nil {
		t.Fatalf("ip -batch: %v\n%s", err, out)
	}
	return d
}

func TestPerf10kRoutes(t *testing.T) {
	if os.Getenv("BIRDCAGE_PERF") == "" {
		t.Skip("set BIRDCAGE_PERF=1 to run the 10k-route comparison with ip -batch")
	}
	requireRoot(t)
	const n, rounds = 10000, 3
	routes := remoteBlocks(n)
	var batch, program, resyncWarm, resyncCold []time.Duration
	for i := range rounds {
		// ip -batch and the table alternate who goes first.
		order := []string{"ip", "table"}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, who := range order {
			tn := newTestNode(t)
			if who == "ip" {
				batch = append(batch, ipBatch(t, tn, routes))
				continue
			}
			tb := New(tn.h, ownerPolicy(), quietLog())
			tb.SetDesired(routes)
			start := time.Now()
			st, err := tb.Apply()
			program = append(program, time.Since(start))
			if err != nil || st.Added != n {
				t.Fatalf("program: %+v %v", st, err)
			}
			start = time.Now()
			st, err = tb.Resync()
			resyncWarm = append(resyncWarm, time.Since(start))
			if err != nil || st.Unchanged != n || st.Added+st.Replaced+st.Deleted != 0 {
				t.Fatalf("resync: %+v %v", st, err)
			}
			cold := New(tn.h, ownerPolicy(), quietLog())
			cold.SetDesired(routes)
			start = time.Now()
			st, err = cold.Resync()
			resyncCold = append(resyncCold, time.Since(start))
			if err != nil || st.Unchanged != n {
				t.Fatalf("cold resync: %+v %v", st, err)
			}
		}
	}
	med := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	ratio := float64(med(program)) / float64(med(batch))
	t.Logf("10k routes, median of %d: ip -batch %v; table program %v (%.2fx); resync unchanged %v (warm) %v (fresh table)",
		rounds, med(batch), med(program), ratio, med(resyncWarm), med(resyncCold))
	t.Logf("all: ip -batch %v; program %v; resync warm %v; resync fresh %v", batch, program, resyncWarm, resyncCold)
	if ratio > 1.5 {
		t.Errorf("initial program %.2fx ip -batch; target within 1.5x", ratio)
	}
	if r := med(resyncWarm); r > 100*time.Millisecond {
		t.Errorf("unchanged resync %v; target under 100ms", r)
	}
}
