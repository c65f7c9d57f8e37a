// Package bgphold stages the order in which BGP messages between one node and one
// peer arrive, for a spec that needs a race to go one way (the connection
// collision during graceful-restart recovery, scenarios/collision_test.go).
// An nftables table in the node's namespace drops chosen BGP messages — by
// the message type, the 19th byte of a BGP message, read at the start of
// the TCP payload — on chosen connections, so the sender's TCP retransmits
// them once the rule is removed; and it counts the SYNs each end sends to
// the other's port 179 (connect attempts). BIRD sees nothing but when bytes
// arrive. Needs the `nft` command (Debian package nftables) and IPv4 peers.
//
// A built cluster starts one with Cluster.HoldBGP; the package itself
// needs only the node's namespace path.
package bgphold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// ErrNoNft is returned by Start when the nft command is not installed.
var ErrNoNft = errors.New("the nft command (nftables) is not installed")

// Conn names one of the two TCP connections a BGP pair can open at once
// by the end that opened it (the one that is not on port 179).
type Conn int

const (
	// NodeOpened is the connection the held node opened to the peer's 179.
	NodeOpened Conn = iota
	// PeerOpened is the connection the peer opened to the node's 179.
	PeerOpened
)

func (c Conn) String() string {
	if c == PeerOpened {
		return "the connection the peer opened"
	}
	return "the connection the node opened"
}

// Dir is a direction between the held node and its peer.
type Dir int

const (
	// FromPeer is peer → node (the node's input).
	FromPeer Dir = iota
	// ToPeer is node → peer (the node's output).
	ToPeer
)

// Message is a BGP message type (RFC 4271 §4.1).
type Message uint8

const (
	Open      Message = 1
	Update    Message = 2
	Keepalive Message = 4
	// TCPSyn is not a BGP message: the connect attempt's SYN (held, the
	// sender's connection stays in BIRD's Connect state).
	TCPSyn Message = 0x100 - 1
	// TCPAfterSyn is not a BGP message: every segment but the SYN. Held
	// from the peer on the peer-opened connection it keeps the handshake
	// half-open in the node's kernel: the peer's BIRD counts itself
	// connected (OpenSent), the node's BIRD has nothing to accept yet.
	TCPAfterSyn Message = 0x100 - 2
)

func (m Message) String() string {
	switch m {
	case Open:
		return "OPEN"
	case Update:
		return "UPDATE"
	case Keepalive:
		return "KEEPALIVE"
	case TCPSyn:
		return "SYN"
	case TCPAfterSyn:
		return "every segment after the SYN"
	}
	return fmt.Sprintf("type-%d", uint8(m))
}

// Rule holds one message type in one direction on one connection.
type Rule struct {
	Dir  Dir
	Conn Conn
	Msg  Message
}

func (r Rule) String() string {
	d := "node->peer"
	if r.Dir == FromPeer {
		d = "peer->node"
	}
	return fmt.Sprintf("%s %s on %s", r.Msg, d, r.Conn)
}

// nft is the rule's chain and match in the node's namespace. The node's
// end of the peer-opened connection is port 179, its end of the
// node-opened one the peer's 179.
func (r Rule) nft(peer netip.Addr) (chain, match string) {
	chain, addr := "out", "ip daddr "+peer.String()
	if r.Dir == FromPeer {
		chain, addr = "in", "ip saddr "+peer.String()
	}
	// Seen from the node: on the peer-opened connection the node is port
	// 179 (dport in, sport out); on the node-opened one the peer is.
	port := "dport"
	if (r.Conn == PeerOpened) != (r.Dir == FromPeer) {
		port = "sport"
	}
	switch r.Msg {
	case TCPSyn:
		return chain, fmt.Sprintf("%s tcp %s 179 tcp flags & (syn|ack) == syn", addr, port)
	case TCPAfterSyn:
		return chain, fmt.Sprintf("%s tcp %s 179 tcp flags & syn == 0", addr, port)
	}
	return chain, fmt.Sprintf("%s tcp %s 179 @ih,144,8 %d", addr, port, uint8(r.Msg))
}

// Hold is a live hold; Release lifts rules, Close lifts them all.
type Hold struct {
	node   string
	nsPath string
	peer   netip.Addr
	table  string

	mu      sync.Mutex
	handles map[Rule]int
	closed  bool
}

const bgpHoldTable = "birdcage_bgphold"

// Options say where a hold goes.
type Options struct {
	// Node names the held node in errors and events.
	Node string
	// Netns is the path of the node's network namespace.
	Netns string
	// Peer is the other end's IPv4 address.
	Peer netip.Addr
	// Guard registers a cleanup with the run (so the table goes on
	// failure, panic and Ctrl-C too); nil: the caller closes the hold.
	Guard func(name string, cleanup func() error) error
	// Mark, if set, records an event once the table is in place.
	Mark func(name string)
}

// Start installs rules in the node's namespace toward the peer: each
// drops its BGP message until released. The table goes with Close, the
// run's guard, and the namespace.
func Start(ctx context.Context, o Options, rules ...Rule) (*Hold, error) {
	node, peer := o.Node, o.Peer
	if _, err := exec.LookPath("nft"); err != nil {
		return nil, ErrNoNft
	}
	if !peer.Is4() {
		return nil, fmt.Errorf("hold BGP on %s: peer %s: only IPv4 peers", node, peer)
	}
	if o.Netns == "" {
		return nil, fmt.Errorf("hold BGP on %s: field Netns: the node's namespace path is empty", node)
	}
	h := &Hold{node: node, nsPath: o.Netns, peer: peer, table: bgpHoldTable, handles: map[Rule]int{}}
	p := peer.String()
	script := fmt.Sprintf(`table ip %[1]s {
	counter peer_syn { }
	counter node_syn { }
	chain in { type filter hook input priority 0; policy accept;
		ip saddr %[2]s tcp dport 179 tcp flags & (syn|ack) == syn counter name peer_syn
	}
	chain out { type filter hook output priority 0; policy accept;
		ip daddr %[2]s tcp dport 179 tcp flags & (syn|ack) == syn counter name node_syn
	}
}
`, h.table, p)
	if o.Guard != nil {
		if err := o.Guard("nftables table "+h.table+" in "+node, h.Close); err != nil {
			return nil, err
		}
	}
	if _, err := h.nftIn(ctx, script, "-f", "-"); err != nil {
		return nil, fmt.Errorf("hold BGP on %s toward %s: %w", node, p, err)
	}
	if o.Mark != nil {
		o.Mark(fmt.Sprintf("HoldBGP(%s<->%s)", node, p))
	}
	if err := h.Hold(ctx, rules...); err != nil {
		return nil, err
	}
	return h, nil
}

var handleRe = regexp.MustCompile(`# handle (\d+)`)

// Hold adds rules (a rule already held is left as it is).
func (h *Hold) Hold(ctx context.Context, rules ...Rule) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range rules {
		if _, ok := h.handles[r]; ok {
			continue
		}
		chain, match := r.nft(h.peer)
		args := append([]string{"-e", "-a", "add", "rule", "ip", h.table, chain}, strings.Fields(match)...)
		args = append(args, "counter", "drop", "comment", strconv.Quote(r.String()))
		out, err := h.nftIn(ctx, "", args...)
		if err != nil {
			return fmt.Errorf("hold %s on %s: %w", r, h.node, err)
		}
		m := handleRe.FindStringSubmatch(out)
		if m == nil {
			return fmt.Errorf("hold %s on %s: nft named no rule handle in %q", r, h.node, out)
		}
		h.handles[r], _ = strconv.Atoi(m[1])
	}
	return nil
}

// Release lifts rules; their held messages arrive at the sender's next
// TCP retransmission.
func (h *Hold) Release(ctx context.Context, rules ...Rule) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range rules {
		hd, ok := h.handles[r]
		if !ok {
			return fmt.Errorf("release %s on %s: not held", r, h.node)
		}
		chain, _ := r.nft(h.peer)
		if _, err := h.nftIn(ctx, "", "delete", "rule", "ip", h.table, chain, "handle", strconv.Itoa(hd)); err != nil {
			return fmt.Errorf("release %s on %s: %w", r, h.node, err)
		}
		delete(h.handles, r)
	}
	return nil
}

// Held lists the rules in place.
func (h *Hold) Held() []Rule {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Rule
	for r := range h.handles {
		out = append(out, r)
	}
	return out
}

// Counts is what the table counted since it was installed.
type Counts struct {
	// PeerSYNs and NodeSYNs are connect attempts: SYNs from the peer to
	// the node's 179, and from the node to the peer's 179.
	PeerSYNs, NodeSYNs uint64
	// Dropped counts the packets each rule still in place dropped.
	Dropped map[string]uint64
}

// Counts reads the table's counters.
func (h *Hold) Counts(ctx context.Context) (Counts, error) {
	out, err := h.nftIn(ctx, "", "-j", "list", "table", "ip", h.table)
	if err != nil {
		return Counts{}, fmt.Errorf("read hold counters on %s: %w", h.node, err)
	}
	var doc struct {
		Nftables []struct {
			Counter *struct {
				Name    string `json:"name"`
				Packets uint64 `json:"packets"`
			} `json:"counter"`
			Rule *struct {
				Comment string            `json:"comment"`
				Expr    []json.RawMessage `json:"expr"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return Counts{}, fmt.Errorf("read hold counters on %s: nft -j: %w", h.node, err)
	}
	hc := Counts{Dropped: map[string]uint64{}}
	for _, o := range doc.Nftables {
		switch {
		case o.Counter != nil && o.Counter.Name == "peer_syn":
			hc.PeerSYNs = o.Counter.Packets
		case o.Counter != nil && o.Counter.Name == "node_syn":
			hc.NodeSYNs = o.Counter.Packets
		case o.Rule != nil && o.Rule.Comment != "":
			for _, e := range o.Rule.Expr {
				var c struct {
					Counter *struct {
						Packets uint64 `json:"packets"`
					} `json:"counter"`
				}
				if json.Unmarshal(e, &c) == nil && c.Counter != nil {
					hc.Dropped[o.Rule.Comment] = c.Counter.Packets
				}
			}
		}
	}
	return hc, nil
}

// Connections is what Connections saw.
type Connections struct {
	NodeOpened, PeerOpened int
	// Sockets are the established sockets counted, "local -> remote inode".
	Sockets []string
}

// Connections counts the established TCP connections between the node
// and the peer on port 179 in the node's namespace, by which end opened
// them.
func (h *Hold) Connections(ctx context.Context) (Connections, error) {
	var bc Connections
	out, err := exec.CommandContext(ctx, "nsenter", "--net="+h.nsPath, "cat", "/proc/net/tcp").Output()
	if err != nil {
		return bc, fmt.Errorf("read TCP sockets of %s: %w", h.node, err)
	}
	peer := h.peer.As4()
	// /proc/net/tcp writes the address as the host-order u32 in hex.
	peerHex := fmt.Sprintf("%02X%02X%02X%02X", peer[3], peer[2], peer[1], peer[0])
	for _, l := range strings.Split(string(out), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) < 4 || f[3] != "01" { // 01: ESTABLISHED
			continue
		}
		local, remote := strings.Split(f[1], ":"), strings.Split(f[2], ":")
		if len(local) != 2 || len(remote) != 2 || remote[0] != peerHex {
			continue
		}
		switch {
		case local[1] == "00B3": // the node's 179: the peer opened it
			bc.PeerOpened++
		case remote[1] == "00B3":
			bc.NodeOpened++
		default:
			continue
		}
		inode := ""
		if len(f) > 9 {
			inode = f[9]
		}
		bc.Sockets = append(bc.Sockets, fmt.Sprintf("%s -> %s inode %s", f[1], f[2], inode))
	}
	return bc, nil
}

// Close deletes the table: every rule is lifted at once.
func (h *Hold) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	h.handles = map[Rule]int{}
	if _, err := h.nftIn(context.Background(), "", "delete", "table", "ip", h.table); err != nil && !strings.Contains(err.Error(), "No such file") {
		return fmt.Errorf("lift BGP hold on %s: %w", h.node, err)
	}
	return nil
}

func (h *Hold) nftIn(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + h.nsPath, "nft"}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
