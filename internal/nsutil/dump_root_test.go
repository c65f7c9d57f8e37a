package nsutil_test

// Dump interruption is real and Dump hides it: with links or addresses
// churning in a namespace, a plain dump there comes back interrupted
// (netlink.ErrDumpInterrupted, the kernel's NLM_F_DUMP_INTR), and the same
// dump through nsutil.Links / nsutil.Addrs retries and gives a consistent
// table: everything that stayed put throughout, exactly once, and nothing
// that never existed. (This kernel flags link and address dumps; it restarts
// an IPv6 route walk itself and does not flag IPv4 route dumps, so routes go
// through the same helper as a precaution, not because a test can show it.)

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// churnNS is a fresh namespace with a veth pair d0/d0p inside it.
func churnNS(t *testing.T) (ns.NetNS, *netlink.Handle, netlink.Link) {
	t.Helper()
	n := testenv.NewNetNS(t, "dump")
	d0 := n.Veth(t, "d0", "d0p")
	return n.NS, n.Handle, d0
}

// provoke runs churn on its own handle in n while dumping in a loop: plain
// (counting interruptions) and through the helper (checking each result
// with consistent, and counting the dumps that needed a retry), until both
// were seen a few times. It fails if churn never interrupted a dump: then
// the test showed nothing.
func provoke(t *testing.T, n ns.NetNS, churn func(h *netlink.Handle, i int) error, plain func() error,
	helper func(attempts *int) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var churnErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		ch, err := nsutil.Handle(n)
		if err != nil {
			churnErr = err
			return
		}
		defer ch.Close()
		for i := 0; ctx.Err() == nil; i++ {
			if err := churn(ch, i); err != nil {
				churnErr = err
				return
			}
		}
	}()
	defer func() { cancel(); wg.Wait() }()

	var plainDumps, plainInterrupted, helperDumps, helperRetried int
	deadline := time.Now().Add(20 * time.Second)
	for (plainInterrupted < 5 || helperRetried < 5) && time.Now().Before(deadline) {
		plainDumps++
		if err := plain(); errors.Is(err, netlink.ErrDumpInterrupted) {
			plainInterrupted++
		} else if err != nil {
			t.Fatalf("plain dump: %v", err)
		}
		helperDumps++
		attempts := 0
		if err := helper(&attempts); err != nil {
			t.Fatalf("dump %d through the helper (%d attempts): %v", helperDumps, attempts, err)
		}
		if attempts > 1 {
			helperRetried++
		}
	}
	cancel()
	wg.Wait()
	if churnErr != nil {
		t.Fatal(churnErr)
	}
	t.Logf("plain dumps: %d, interrupted %d; helper dumps: %d, of which %d needed a retry, all consistent",
		plainDumps, plainInterrupted, helperDumps, helperRetried)
	if plainInterrupted == 0 || helperRetried == 0 {
		t.Fatalf("churn never interrupted a dump (plain %d of %d, helper retried %d of %d): the test did not provoke what it is about",
			plainInterrupted, plainDumps, helperRetried, helperDumps)
	}
}

func TestLinkDumpUnderLinkChurn(t *testing.T) {
	n, h, _ := churnNS(t)
	// 1. Enough stable links that one dump takes many netlink messages (the
	// kernel can flag a dump interrupted only between two of them).
	const pairs = 100
	for i := range pairs {
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("s%d", i)}, PeerName: fmt.Sprintf("s%dp", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// 2. Churn: a veth pair created and deleted over and over.
	churn := func(ch *netlink.Handle, i int) error {
		if err := ch.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cx"}, PeerName: "cxp"}); err != nil {
			return fmt.Errorf("churn: add cx: %w", err)
		}
		l, err := ch.LinkByName("cx")
		if err != nil {
			return err
		}
		if err := ch.LinkDel(l); err != nil {
			return fmt.Errorf("churn: delete cx: %w", err)
		}
		return nil
	}
	// 3. The helper's lists hold every stable link once, and only links
	// that exist at some point.
	provoke(t, n, churn, func() error { _, err := h.LinkList(); return err }, func(attempts *int) error {
		ls, err := nsutil.Dump("list links", func() ([]netlink.Link, error) { *attempts++; return h.LinkList() })
		if err != nil {
			return err
		}
		seen := map[string]int{}
		for _, l := range ls {
			seen[l.Attrs().Name]++
		}
		for i := range pairs {
			for _, name := range []string{fmt.Sprintf("s%d", i), fmt.Sprintf("s%dp", i)} {
				if seen[name] != 1 {
					return fmt.Errorf("stable link %s listed %d times, want once", name, seen[name])
				}
			}
		}
		for name := range seen {
			if name != "lo" && name != "d0" && name != "d0p" && name != "cx" && name != "cxp" && !strings.HasPrefix(name, "s") {
				return fmt.Errorf("link %s listed, which nobody made", name)
			}
		}
		return nil
	})
}

func TestAddrDumpUnderAddressChurn(t *testing.T) {
	n, h, d0 := churnNS(t)
	// 1. Enough stable addresses on d0 that a dump takes many messages.
	const stable = 500
	stableAddr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 90, byte(i >> 8), byte(i)}) }
	addr := func(a netip.Addr) *netlink.Addr {
		return &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}}
	}
	for i := range stable {
		if err := h.AddrAdd(d0, addr(stableAddr(i))); err != nil {
			t.Fatalf("stable address %d: %v", i, err)
		}
	}
	// 2. Churn: an address in another range added and deleted every
	// millisecond. That interrupts a good share of dumps but not all: a
	// change every few microseconds would interrupt every dump, and no
	// number of retries gets a consistent table then (Dump says so).
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	churn := func(ch *netlink.Handle, i int) error {
		<-tick.C // the churn rate, not synchronisation
		a := addr(netip.AddrFrom4([4]byte{10, 91, 0, byte(i)}))
		if err := ch.AddrAdd(d0, a); err != nil {
			return fmt.Errorf("churn: add %s: %w", a.IPNet, err)
		}
		if err := ch.AddrDel(d0, a); err != nil {
			return fmt.Errorf("churn: delete %s: %w", a.IPNet, err)
		}
		return nil
	}
	// 3. The helper's lists hold every stable address once, and only
	// addresses from the two ranges.
	plain := func() error { _, err := h.AddrList(nil, netlink.FAMILY_V4); return err }
	provoke(t, n, churn, plain, func(attempts *int) error {
		as, err := nsutil.Dump("list addresses", func() ([]netlink.Addr, error) { *attempts++; return h.AddrList(nil, netlink.FAMILY_V4) })
		if err != nil {
			return err
		}
		seen := map[netip.Addr]int{}
		for _, a := range as {
			ip, _ := netip.AddrFromSlice(a.IP.To4())
			seen[ip]++
		}
		for i := range stable {
			if c := seen[stableAddr(i)]; c != 1 {
				return fmt.Errorf("stable address %s listed %d times, want once", stableAddr(i), c)
			}
		}
		for ip := range seen {
			if b := ip.As4(); !ip.IsLoopback() && (b[0] != 10 || (b[1] != 90 && b[1] != 91)) {
				return fmt.Errorf("address %s listed, which nobody added", ip)
			}
		}
		return nil
	})
}
