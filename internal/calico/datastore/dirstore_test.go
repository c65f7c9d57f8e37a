// These tests hold the datastore's contract in place: documents round-trip,
// every invalid document fails the whole read with an error that names the
// file, the field and what would be valid, writes are atomic, and a change is
// signalled (coalesced) to watchers.
package datastore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newStore(t *testing.T) *DirStore {
	t.Helper()
	s, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPutReadRoundTrip(t *testing.T) {
	s := newStore(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Put(KindIPPool, "ipip", IPPool{CIDR: "10.65.0.0/16", IPIPMode: EncapAlways}))
	must(s.Put(KindIPPool, "flat", &IPPool{Name: "flat", CIDR: "10.66.0.0/16", IPIPMode: EncapNever}))
	must(s.Put(KindNode, "node-1", Node{IPv4Address: "10.0.1.11/24", Uplinks: []Uplink{{Interface: "eth0", Address: "10.0.1.11/24", Gateway: "10.0.1.1"}}}))
	must(s.Put(KindBlockAffinity, "10-65-0-0-26", BlockAffinity{CIDR: "10.65.0.0/26", Node: "node-1"}))
	must(s.Put(KindWorkload, "w1", Workload{Node: "node-1", Interface: "cali1", Addresses: []string{"10.65.0.1/32"}}))
	must(s.Put(KindFelixConfiguration, "ignored", FelixConfiguration{ProgramClusterRoutes: "SomethingNew", RouteRefreshInterval: "2s"}))
	must(s.Put(KindBGPConfiguration, "", BGPConfiguration{ProgramClusterRoutes: "Enabled"}))

	c, err := s.Read(context.Background())
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if len(c.Pools) != 2 || c.Pools[0].Name != "flat" || c.Pools[1].Name != "ipip" {
		t.Errorf("pools: want flat, ipip (sorted, names from files); got %+v", c.Pools)
	}
	if n, ok := c.Node("node-1"); !ok || n.Uplinks[0].Gateway != "10.0.1.1" {
		t.Errorf("node-1: got %+v, %v", n, ok)
	}
	if len(c.Blocks) != 1 || len(c.Workloads) != 1 || c.Workloads[0].Name != "w1" {
		t.Errorf("blocks/workloads: got %+v / %+v", c.Blocks, c.Workloads)
	}
	// An unknown programClusterRoutes value is not a datastore error: both
	// components default it identically (config.Resolve).
	if c.Felix.ProgramClusterRoutes != "SomethingNew" || c.BGP.ProgramClusterRoutes != "Enabled" {
		t.Errorf("configurations: got %+v / %+v", c.Felix, c.BGP)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "felixconfiguration", "default.json")); err != nil {
		t.Errorf("singleton not stored as default.json: %v", err)
	}
	// No temp files are left behind by atomic writes.
	for _, k := range Kinds {
		ents, _ := os.ReadDir(filepath.Join(s.Dir, string(k)))
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("temp file left: %s/%s", k, e.Name())
			}
		}
	}

	must(s.Delete(KindWorkload, "w1"))
	must(s.Delete(KindWorkload, "w1")) // missing is not an error
	c, err = s.Read(context.Background())
	if err != nil || len(c.Workloads) != 0 {
		t.Errorf("after delete: %v, %+v", err, c)
	}
}

func TestReadRejectsInvalidDocuments(t *testing.T) {
	for _, tc := range []struct {
		name, kind, file, body string
		want                   []string // substrings of the error
	}{
		{"ipipMode", "ippools", "p1", `{"cidr":"10.65.0.0/16","ipipMode":"Sometimes"}`,
			[]string{`/ippools/p1.json": field ipipMode: "Sometimes" is not one of Always, CrossSubnet, Never`}},
		{"vxlanMode", "ippools", "p1", `{"cidr":"10.65.0.0/16","vxlanMode":"Always"}`,
			[]string{`field vxlanMode: "Always" is not one of Never`}},
		{"bad CIDR", "ippools", "p1", `{"cidr":"10.65.0.0/33"}`, []string{`p1.json": field cidr: "10.65.0.0/33" is not a CIDR`}},
		{"host bits", "blockaffinities", "b", `{"cidr":"10.65.0.1/26","node":"n"}`, []string{`field cidr: "10.65.0.1/26" has host bits set; did you mean 10.65.0.0/26`}},
		{"blockSize", "ippools", "p1", `{"cidr":"10.65.0.0/16","blockSize":12}`, []string{`field blockSize: 12 is out of range 20..32`}},
		{"unknown field", "ippools", "p1", `{"cidr":"10.65.0.0/16","ipipmode":"Always"}`,
			[]string{`field ipipmode: unknown field; valid fields are name, cidr, ipipMode, vxlanMode, blockSize, disabled`}},
		{"malformed", "nodes", "n1", `{"name":"n1",`, []string{`nodes/n1.json": malformed JSON`}},
		{"trailing", "nodes", "n1", `{"name":"n1"} {}`, []string{`nodes/n1.json": malformed JSON`}},
		{"wrong type", "nodes", "n1", `{"name":"n1","asNumber":"64512"}`, []string{`field asNumber: a JSON string is not a valid int`}},
		{"name mismatch", "nodes", "n1", `{"name":"n2"}`, []string{`field name: "n2" does not match the file name "n1.json"`}},
		{"node address", "nodes", "n1", `{"ipv4Address":"10.0.0.1"}`, []string{`field ipv4Address: "10.0.0.1" is not an address with a prefix length`}},
		{"uplink gateway", "nodes", "n1", `{"uplinks":[{"interface":"eth0"},{"interface":"eth1","gateway":"x"}]}`, []string{`field uplinks[1].gateway: "x" is not an IP address`}},
		{"workload /24", "workloads", "w", `{"node":"n","interface":"cali1","addresses":["10.65.0.0/24"]}`, []string{`field addresses[0]: "10.65.0.0/24" is not a /32 or /128 CIDR`}},
		{"workload iface", "workloads", "w", `{"node":"n","interface":"cali-much-too-long-name","addresses":[]}`, []string{`field interface:`}},
		{"protocol", "felixconfiguration", "default", `{"deviceRouteProtocol":300}`, []string{`field deviceRouteProtocol: 300 is not a kernel route protocol`}},
		{"refresh", "felixconfiguration", "default", `{"routeRefreshInterval":"soon"}`, []string{`field routeRefreshInterval: "soon" is not a duration`}},
		{"singleton name", "felixconfiguration", "other", `{}`, []string{`felixconfiguration/other.json": a felixconfiguration document must be named "default"`}},
		{"peer", "bgppeers", "tor", `{"peerIP":"10.0.0.1"}`, []string{`field asNumber: 0 is not an AS number`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if err := os.WriteFile(filepath.Join(s.Dir, tc.kind, tc.file+".json"), []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := s.Read(context.Background())
			if err == nil {
				t.Fatalf("read accepted %s/%s.json: %s", tc.kind, tc.file, tc.body)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not contain %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), s.Dir) {
				t.Errorf("error %q does not name the file's full path", err)
			}
		})
	}
}

func TestReadRejectsInconsistentDocuments(t *testing.T) {
	s := newStore(t)
	_ = s.Put(KindIPPool, "a", IPPool{CIDR: "10.65.0.0/16"})
	_ = s.Put(KindIPPool, "b", IPPool{CIDR: "10.65.128.0/17"})
	if _, err := s.Read(context.Background()); err == nil || !strings.Contains(err.Error(), `ippools/b.json": field cidr: 10.65.128.0/17 overlaps pool "a"`) {
		t.Errorf("overlapping pools: got %v", err)
	}
	_ = s.Delete(KindIPPool, "b")
	_ = s.Put(KindBlockAffinity, "x", BlockAffinity{CIDR: "10.65.0.0/26", Node: "n1"})
	_ = s.Put(KindBlockAffinity, "y", BlockAffinity{CIDR: "10.65.0.0/26", Node: "n2"})
	if _, err := s.Read(context.Background()); err == nil || !strings.Contains(err.Error(), `blockaffinities/y.json": field cidr: block 10.65.0.0/26 is also affine to node "n1"`) {
		t.Errorf("double affinity: got %v", err)
	}
}

func TestPutRejectsBadDocuments(t *testing.T) {
	s := newStore(t)
	if err := s.Put(KindIPPool, "p", Node{}); err == nil || !strings.Contains(err.Error(), "is a datastore.IPPool, not datastore.Node") {
		t.Errorf("wrong type: %v", err)
	}
	if err := s.Put(KindIPPool, "p", IPPool{CIDR: "10.65.0.0/16", IPIPMode: "Sometimes"}); err == nil || !strings.Contains(err.Error(), `ippools/p.json": field ipipMode`) {
		t.Errorf("invalid doc: %v", err)
	}
	if _, err := os.Stat(s.Path(KindIPPool, "p")); !os.IsNotExist(err) {
		t.Errorf("invalid document was written: %v", err)
	}
	if err := s.Put(KindNode, "../x", Node{}); err == nil {
		t.Errorf("path traversal name accepted")
	}
	if err := s.Put("widgets", "x", Node{}); err == nil || !strings.Contains(err.Error(), "valid kinds are ippools") {
		t.Errorf("unknown kind: %v", err)
	}
}

func TestWatchSignalsCoalescedChanges(t *testing.T) {
	s := newStore(t)
	s.WatchResync = time.Hour // only inotify here
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := s.Put(KindNode, "n", Node{ASNumber: 64512 + i}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no signal within 5s of 50 writes")
	}
	// A burst gives one pending signal at most: drain whatever is pending;
	// the channel has capacity 1 so there can be no more than one.
	if n := len(ch); n > 1 {
		t.Errorf("pending signals after a burst: %d", n)
	}

	cancel()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch channel not closed after cancel")
		}
	}
}

func TestWatchSafetyNetReread(t *testing.T) {
	s := newStore(t)
	s.WatchResync = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A kind directory created after Watch started is still covered: the
	// periodic re-read notices the file even if no inotify watch exists on it.
	if err := os.RemoveAll(filepath.Join(s.Dir, "nodes")); err != nil {
		t.Fatal(err)
	}
	drain(ch)
	if err := os.MkdirAll(filepath.Join(s.Dir, "nodes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(KindNode, "late", Node{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no signal for a document in a re-created kind directory")
	}
	before := s.fingerprint()
	if err := s.Put(KindNode, "late", Node{ASNumber: 1}); err != nil {
		t.Fatal(err)
	}
	if s.fingerprint() == before {
		t.Error("fingerprint did not change after a rewrite")
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func TestReadRejectsCaseMismatchedNestedField(t *testing.T) {
	s := newStore(t)
	body := `{"uplinks":[{"interface":"eth0","GateWay":"10.0.0.1"}]}`
	if err := os.WriteFile(filepath.Join(s.Dir, "nodes", "n1.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := s.Read(context.Background())
	if err == nil || !strings.Contains(err.Error(), "field uplinks[0].GateWay: unknown field; valid fields are interface, address, gateway") {
		t.Errorf("got %v", err)
	}
}
