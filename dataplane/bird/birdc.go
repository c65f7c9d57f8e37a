package bird

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Client speaks BIRD's control-socket protocol directly (what birdc does):
// one command per line, replies as "DDDD-text" continuation lines and a
// final "DDDD text" line. Codes 0xxx end a successful reply, 8xxx and 9xxx
// are errors. Each call opens its own connection, so a Client is safe for
// concurrent use and survives BIRD restarts.
type Client struct {
	Socket string
}

// Reply is one command's answer.
type Reply struct {
	// Code is the code of the final line (0 for "0000").
	Code int
	// Lines holds every line with its code (continuation lines without a
	// code of their own carry the previous code), text without the prefix.
	Lines []ReplyLine
}

// ReplyLine is one line of a reply.
type ReplyLine struct {
	Code int
	Text string
}

// Text joins the reply's lines.
func (r Reply) Text() string {
	var b strings.Builder
	for _, l := range r.Lines {
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// ErrCommand is wrapped by errors for replies with an 8xxx/9xxx code.
var ErrCommand = errors.New("bird refused the command")

// Run sends one command and returns its reply. A reply with an error code
// is returned together with an error wrapping ErrCommand.
func (c *Client) Run(ctx context.Context, cmd string) (Reply, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return Reply{}, fmt.Errorf("birdc %s: %w", c.Socket, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	rd := bufio.NewReader(conn)
	hello, err := readReply(rd)
	if err != nil {
		return Reply{}, fmt.Errorf("birdc %s: greeting: %w", c.Socket, err)
	}
	if hello.Code != 1 {
		return Reply{}, fmt.Errorf("birdc %s: unexpected greeting %q", c.Socket, hello.Text())
	}
	if _, err := conn.Write([]byte(cmd + "\n")); err != nil {
		return Reply{}, fmt.Errorf("birdc %s: %q: %w", c.Socket, cmd, err)
	}
	r, err := readReply(rd)
	if err != nil {
		return r, fmt.Errorf("birdc %s: %q: %w", c.Socket, cmd, err)
	}
	if r.Code >= 8000 {
		return r, fmt.Errorf("birdc %q: %w: %s", cmd, ErrCommand, strings.TrimSpace(r.Text()))
	}
	return r, nil
}

// Ping reports whether BIRD answers on the socket (greeting read). A stale
// socket file left by a killed BIRD does not answer.
func (c *Client) Ping(ctx context.Context) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	_, err = readReply(bufio.NewReader(conn))
	return err
}

func readReply(rd *bufio.Reader) (Reply, error) {
	var r Reply
	code := 0
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return r, err
		}
		line = strings.TrimSuffix(line, "\n")
		if len(line) >= 5 && isDigits(line[:4]) && (line[4] == '-' || line[4] == ' ') {
			code, _ = strconv.Atoi(line[:4])
			r.Lines = append(r.Lines, ReplyLine{Code: code, Text: line[5:]})
			if line[4] == ' ' {
				r.Code = code
				return r, nil
			}
			continue
		}
		// Continuation of the previous code: one leading space.
		r.Lines = append(r.Lines, ReplyLine{Code: code, Text: strings.TrimPrefix(line, " ")})
	}
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Protocol is one row of `show protocols [all]`.
type Protocol struct {
	Name  string
	Proto string // BGP, Kernel, Static, Direct, Device
	Table string
	State string // up, down, start, stop
	Since time.Time
	// Info is the last column; for BGP its first word is the BGP state.
	Info string
	// BGPState is "Established", "Connect", "Active", "Idle", ... for BGP
	// protocols (from "BGP state:" with all, else from Info).
	BGPState string
	// Details holds "Key: value" lines of `show protocols all` at the
	// protocol level (e.g. "Neighbor address", "Last error").
	Details map[string]string
	// Channels holds the per-channel details of `show protocols all`, by
	// channel name (ipv4, ipv6).
	Channels map[string]map[string]string
	// NeighborRestarting: BIRD helps this BGP neighbor through a graceful
	// restart ("Neighbor graceful restart active", every release 1.6–3.1):
	// it holds the neighbor's routes as stale until the neighbor's
	// End-of-RIB, when it takes the fresh ones (rewriting their kernel
	// routes) and drops what was not re-sent.
	NeighborRestarting bool
}

// Established reports whether a BGP session is up.
func (p Protocol) Established() bool { return p.State == "up" && p.BGPState == "Established" }

// timeLayout matches "timeformat ... iso long ms" (rendered by confd).
const timeLayout = "2006-01-02 15:04:05.000"

var dateRe = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// parseSince reads BIRD's "since" from fields at i; it returns the time and
// how many fields it used (2 for iso long, 1 for the short formats).
func parseSince(f []string, i int) (time.Time, int) {
	if i >= len(f) {
		return time.Time{}, 0
	}
	if dateRe.MatchString(f[i]) && i+1 < len(f) {
		s := f[i] + " " + f[i+1]
		for _, l := range []string{timeLayout, "2006-01-02 15:04:05"} {
			if t, err := time.ParseInLocation(l, s, time.Local); err == nil {
				return t, 2
			}
		}
		return time.Time{}, 2
	}
	if t, err := time.ParseInLocation("15:04:05.000", f[i], time.Local); err == nil {
		n := time.Now()
		return time.Date(n.Year(), n.Month(), n.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.Local), 1
	}
	return time.Time{}, 1
}

// ParseProtocols parses the reply of `show protocols [all] [name]`.
func ParseProtocols(r Reply) ([]Protocol, error) {
	var out []Protocol
	var cur *Protocol
	var ch map[string]string
	for _, l := range r.Lines {
		switch l.Code {
		case 1002:
			f := strings.Fields(l.Text)
			if len(f) < 4 {
				return nil, fmt.Errorf("show protocols: short row %q", l.Text)
			}
			p := Protocol{Name: f[0], Proto: f[1], Table: f[2], State: f[3], Details: map[string]string{}, Channels: map[string]map[string]string{}}
			since, n := parseSince(f, 4)
			p.Since = since
			if 4+n < len(f) {
				p.Info = strings.Join(f[4+n:], " ")
			}
			if p.Proto == "BGP" && p.Info != "" {
				p.BGPState = strings.Fields(p.Info)[0]
			}
			out = append(out, p)
			cur, ch = &out[len(out)-1], nil
		case 1006:
			if cur == nil {
				continue
			}
			t := strings.TrimSpace(l.Text)
			if t == "" {
				continue
			}
			if name, ok := strings.CutPrefix(t, "Channel "); ok {
				ch = map[string]string{}
				cur.Channels[name] = ch
				continue
			}
			if t == "Neighbor graceful restart active" && ch == nil {
				cur.NeighborRestarting = true
				continue
			}
			k, v, ok := strings.Cut(t, ":")
			if !ok {
				continue
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			// BIRD prints protocol details first, then each channel's.
			if ch != nil {
				ch[k] = v
				continue
			}
			cur.Details[k] = v
			if k == "BGP state" {
				cur.BGPState = v
			}
		}
	}
	return out, nil
}

// Route is one route of `show route [export P] [all]`. A prefix with
// several routes (alternatives) gives several Route values.
type Route struct {
	Table  string // master4, master6
	Prefix netip.Prefix
	// Dest is "unicast", "blackhole", "unreachable", "prohibited".
	Dest     string
	Protocol string
	Since    time.Time
	From     netip.Addr // "from" of BGP routes learned not directly
	// Primary is the `*` flag: the best route, the one exported.
	Primary bool
	// Refused is the `!` flag of `show route export <kernel>`: the kernel
	// refused the route (sync error); the previous kernel route stays.
	Refused    bool
	Preference int
	// Metric is the IGP metric after the slash, -1 when absent.
	Metric int
	// Info is the bracketed tail, e.g. "[i]" origin / AS path summary.
	Info     string
	Nexthops []Nexthop
	// Type is the "Type:" line of `all` ("BGP univ", "static univ").
	Type string
	// Attrs holds the attribute lines of `all` ("BGP.next_hop",
	// "BGP.as_path", "Kernel.source", ...).
	Attrs map[string]string
}

// Nexthop is one path of a route.
type Nexthop struct {
	Gateway netip.Addr // zero for device routes ("dev X")
	Iface   string
	Weight  int
	Onlink  bool
}

var routeRe = regexp.MustCompile(`^(\S+)?\s+(\S+) \[(\S+) ([^\]]*?)(?: from (\S+))?\]( [*!])? \((\d+)(?:/(\S+))?\)(?: (\[.*\]))?\s*$`)

// routeRe16 is a route line of BIRD 1.x, which puts the next hop (or the
// route's kind) where 2.x puts "unicast":
// "10.0.0.0/26    via 10.1.0.3 on eth0 [Mesh_10_1_0_3 2026-12-01 13:01:39] * (100/0) [i]".
var routeRe16 = regexp.MustCompile(`^(\S+)?\s+(via \S+ on \S+|dev \S+|blackhole|unreachable|prohibited|multipath) \[(\S+) ([^\]]*?)(?: from (\S+))?\]( [*!])? \((\d+)(?:/(\S+))?\)(?: (\[.*\]))?\s*$`)

// ParseRoutes parses the reply of `show route ...`.
func ParseRoutes(r Reply) ([]Route, error) {
	var out []Route
	table := ""
	var last netip.Prefix
	var cur *Route
	for _, l := range r.Lines {
		t := l.Text
		if tb, ok := strings.CutPrefix(t, "Table "); ok && strings.HasSuffix(tb, ":") {
			table = strings.TrimSuffix(tb, ":")
			cur = nil
			continue
		}
		if strings.HasPrefix(t, "\t") {
			t = strings.TrimPrefix(t, "\t")
			if cur == nil {
				continue
			}
			switch {
			case strings.HasPrefix(t, "via "), strings.HasPrefix(t, "dev "):
				nh, err := parseNexthop(t)
				if err != nil {
					return nil, fmt.Errorf("show route %s: %w", cur.Prefix, err)
				}
				cur.Nexthops = append(cur.Nexthops, nh)
			case strings.HasPrefix(t, "Type: "):
				cur.Type = strings.TrimPrefix(t, "Type: ")
			default:
				if k, v, ok := strings.Cut(t, ":"); ok {
					cur.Attrs[strings.TrimSpace(k)] = strings.TrimSpace(v)
				}
			}
			continue
		}
		if l.Code != 1007 || strings.TrimSpace(t) == "" {
			continue
		}
		m := routeRe.FindStringSubmatch(t)
		var nh16 *Nexthop
		if m == nil {
			// BIRD 1.x: the next hop is on the route's line.
			if m = routeRe16.FindStringSubmatch(t); m == nil {
				return nil, fmt.Errorf("show route: cannot parse %q", t)
			}
			if strings.HasPrefix(m[2], "via ") || strings.HasPrefix(m[2], "dev ") {
				nh, err := parseNexthop(m[2])
				if err != nil {
					return nil, fmt.Errorf("show route: %w", err)
				}
				nh16 = &nh
				m[2] = "unicast"
			}
		}
		rt := Route{Table: table, Dest: m[2], Protocol: m[3], Metric: -1, Info: m[9], Attrs: map[string]string{}}
		if nh16 != nil {
			rt.Nexthops = append(rt.Nexthops, *nh16)
		}
		if m[1] != "" {
			p, err := netip.ParsePrefix(m[1])
			if err != nil {
				return nil, fmt.Errorf("show route: prefix %q: %w", m[1], err)
			}
			last = p
		}
		rt.Prefix = last
		if f := strings.Fields(m[4]); len(f) > 0 {
			rt.Since, _ = parseSince(f, 0)
		}
		if m[5] != "" {
			rt.From, _ = netip.ParseAddr(m[5])
		}
		rt.Primary = m[6] == " *"
		rt.Refused = m[6] == " !"
		rt.Preference, _ = strconv.Atoi(m[7])
		if m[8] != "" {
			if n, err := strconv.Atoi(m[8]); err == nil {
				rt.Metric = n
			}
		}
		out = append(out, rt)
		cur = &out[len(out)-1]
	}
	return out, nil
}

// parseNexthop reads "via 10.0.0.2 on eth0 [weight 1] [onlink]" or "dev eth0".
func parseNexthop(s string) (Nexthop, error) {
	f := strings.Fields(s)
	var nh Nexthop
	for i := 0; i < len(f); i++ {
		switch f[i] {
		case "via":
			if i+1 < len(f) {
				a, err := netip.ParseAddr(f[i+1])
				if err != nil {
					return nh, fmt.Errorf("nexthop %q: %w", s, err)
				}
				nh.Gateway = a
				i++
			}
		case "on", "dev":
			if i+1 < len(f) {
				nh.Iface = f[i+1]
				i++
			}
		case "weight":
			if i+1 < len(f) {
				nh.Weight, _ = strconv.Atoi(f[i+1])
				i++
			}
		case "onlink":
			nh.Onlink = true
		}
	}
	return nh, nil
}

// Protocols runs `show protocols all` and parses it.
func (c *Client) Protocols(ctx context.Context) ([]Protocol, error) {
	r, err := c.Run(ctx, "show protocols all")
	if err != nil {
		return nil, err
	}
	return ParseProtocols(r)
}

// replyGRRecovery is the code of `show status`'s "Graceful restart
// recovery in progress" line (every release 1.6–3.1): BIRD was started
// with -R and still waits for its peers' End-of-RIB and its kernel scan
// before it writes its own routes and drops the ones it did not re-learn.
const replyGRRecovery = 24

// InRecovery reports whether BIRD's `show status` says graceful-restart
// recovery is in progress. Calico's readiness probe (calico-node
// -bird-ready) reads the same line: a restarted node is not ready while
// it shows.
func (c *Client) InRecovery(ctx context.Context) (bool, error) {
	r, err := c.Run(ctx, "show status")
	if err != nil {
		return false, err
	}
	return inRecovery(r), nil
}

// inRecovery reads a `show status` reply.
func inRecovery(r Reply) bool {
	for _, l := range r.Lines {
		if l.Code == replyGRRecovery {
			return true
		}
	}
	return false
}

// replyNetworkNotFound is BIRD's reply code to `show route PREFIX` when
// its table has no route to PREFIX.
const replyNetworkNotFound = 8001

// Routes runs `show route all` (with args inserted, e.g. "export kernel4"
// or "for 10.0.0.0/24" or "protocol Mesh_10_0_0_12") and parses it.
func (c *Client) Routes(ctx context.Context, args string) ([]Route, error) {
	cmd := "show route all"
	if args != "" {
		cmd = "show route " + args + " all"
	}
	r, err := c.Run(ctx, cmd)
	if r.Code == replyNetworkNotFound {
		return nil, nil // BIRD's answer for a prefix it has no route to
	}
	if err != nil {
		return nil, err
	}
	return ParseRoutes(r)
}
