package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/report/results"
)

// Server serves one cluster's control socket.
type Server struct {
	c    *harness.Cluster
	ln   *net.UnixListener
	path string
	log  *slog.Logger

	act   sync.Mutex // actions that change the cluster run one at a time
	probe sync.Mutex // one probe session at a time: flows share addresses

	downOnce sync.Once
	down     chan struct{}
	conns    sync.WaitGroup
}

// Listen opens the control socket at path (mode 0600) for c.
func Listen(c *harness.Cluster, path string, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	_ = os.Remove(path)
	old := syscall.Umask(0o177) // no window in which the socket is wider than 0600
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return &Server{c: c, ln: ln, path: path, log: log, down: make(chan struct{})}, nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Down is closed once a `down` request has torn the cluster down.
func (s *Server) Down() <-chan struct{} { return s.down }

// Close stops accepting requests and removes the socket; requests in
// progress end with the cluster.
func (s *Server) Close() error {
	err := s.ln.Close()
	_ = os.Remove(s.path)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Serve accepts requests until Close.
func (s *Server) Serve() error {
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go s.handle(conn)
	}
}

// out writes reply lines; the event streamer and the verb share it.
type out struct {
	mu    sync.Mutex
	enc   *json.Encoder
	start int64
	err   error
}

func (o *out) line(l Line) {
	if l.Mono != 0 {
		l.RunMs = monoclock.Ms(l.Mono - o.start)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		o.err = o.enc.Encode(l)
	}
}

func (o *out) text(format string, args ...any) {
	o.line(Line{Kind: KindText, Text: fmt.Sprintf(format, args...)})
}

func (o *out) event(mono int64, format string, args ...any) {
	o.line(Line{Kind: KindEvent, Mono: mono, Text: fmt.Sprintf(format, args...)})
}

func (s *Server) handle(conn *net.UnixConn) {
	defer conn.Close()
	if err := checkPeerRoot(conn); err != nil {
		_ = json.NewEncoder(conn).Encode(Line{Kind: KindStatus, Error: err.Error()})
		return
	}
	br := bufio.NewReader(conn)
	var req Request
	if err := json.NewDecoder(br).Decode(&req); err != nil {
		_ = json.NewEncoder(conn).Encode(Line{Kind: KindStatus, Error: "bad request: " + err.Error()})
		return
	}
	// The client sends nothing after its request: a read that returns
	// means it went away (Ctrl-C), which ends the request.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		var b [1]byte
		_, _ = conn.Read(b[:])
		cancel()
	}()
	o := &out{enc: json.NewEncoder(conn)}
	if ev := s.c.Events(); len(ev) > 0 {
		o.start = ev[0].Mono
	}
	s.log.Info("control request", "verb", req.Verb, "node", req.Node)
	err := s.dispatch(ctx, req, o)
	st := Line{Kind: KindStatus, OK: err == nil}
	if err != nil {
		st.Error = err.Error()
	}
	o.line(st)
	if req.Verb == "down" && err == nil {
		s.downOnce.Do(func() { close(s.down) })
	}
}

func checkPeerRoot(conn *net.UnixConn) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if cred.Uid != 0 {
		return fmt.Errorf("the birdcage supervisor serves root only (peer uid %d)", cred.Uid)
	}
	return nil
}

func (s *Server) dispatch(ctx context.Context, req Request, o *out) error {
	wait := 60 * time.Second
	if req.Wait != "" {
		d, err := time.ParseDuration(req.Wait)
		if err != nil {
			return fmt.Errorf("wait %q: not a duration (like 30s)", req.Wait)
		}
		wait = d
	}
	switch req.Verb {
	case "info":
		return s.info(o)
	case "upgrade":
		return s.upgrade(ctx, req, o, wait)
	case "set":
		return s.set(ctx, req, o, wait)
	case "bird":
		return s.bird(ctx, req, o, wait)
	case "probe":
		return s.probeVerb(ctx, req, o)
	case "timeline":
		return s.timeline(req, o)
	case "birdc":
		return s.birdc(ctx, req, o)
	case "routes":
		return s.routes(req, o)
	case "down":
		return s.teardown(o)
	}
	return fmt.Errorf("unknown verb %q (info, upgrade, set, bird, probe, timeline, birdc, routes, down)", req.Verb)
}

// withEvents runs fn while streaming every harness event (Cluster.Mark)
// recorded from now on, the ones fn makes and any another client's verb
// makes meanwhile.
func (s *Server) withEvents(o *out, fn func() error) error {
	from := len(s.c.Events())
	flush := func() {
		ev := s.c.Events()
		for ; from < len(ev); from++ {
			o.event(ev[from].Mono, "%s", ev[from].Name)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				flush()
			}
		}
	}()
	err := fn()
	close(done)
	wg.Wait()
	flush()
	return err
}

func (s *Server) node(name string) (*harness.Node, error) {
	var names []string
	for _, n := range s.c.Nodes() {
		if n.Name == name {
			return n, nil
		}
		names = append(names, n.Name)
	}
	if name == "" {
		return nil, fmt.Errorf("name a node (%s)", strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("run %s has no node %q; its nodes are %s", s.c.Run.ID, name, strings.Join(names, ", "))
}

func parseSignal(s string) (syscall.Signal, error) {
	switch strings.TrimPrefix(strings.ToUpper(s), "SIG") {
	case "", "KILL":
		return syscall.SIGKILL, nil
	case "TERM":
		return syscall.SIGTERM, nil
	}
	return 0, fmt.Errorf("signal %q: valid signals are KILL (default) and TERM", s)
}

func signalName(sig syscall.Signal) string {
	if sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGKILL"
}

// Info is what `info` returns (and `up --detach` prints).
type Info struct {
	Run      string   `json:"run"`
	Topology string   `json:"topology"`
	Nodes    []string `json:"nodes"`
	Routers  []string `json:"routers,omitempty"`
	Socket   string   `json:"socket"`
	Dir      string   `json:"dir"`
	PID      int      `json:"pid"`
	// ConvergedMs is Start to Converged on the run's clock.
	ConvergedMs float64           `json:"convergedMs"`
	Events      []results.Event   `json:"events"`
	Releases    map[string]string `json:"releases"`
}

// InfoOf describes the cluster a server serves.
func InfoOf(c *harness.Cluster, socket string) Info {
	in := Info{Run: c.Run.ID, Topology: c.Net.Topology.Name, Socket: socket, Dir: c.Run.Dir, PID: os.Getpid(), Events: c.Events(), Releases: map[string]string{}}
	for _, n := range c.Nodes() {
		in.Nodes = append(in.Nodes, n.Name)
		in.Releases[n.Name] = string(n.Release())
	}
	for _, r := range c.Fabric().Routers() {
		in.Routers = append(in.Routers, r.Name)
	}
	var start, conv int64
	for _, e := range in.Events {
		switch e.Name {
		case "Start":
			start = e.Mono
		case "Converged":
			conv = e.Mono
		}
	}
	if start != 0 && conv != 0 {
		in.ConvergedMs = monoclock.Ms(conv - start)
	}
	return in
}

func (s *Server) info(o *out) error {
	in := InfoOf(s.c, s.path)
	b, _ := json.Marshal(in)
	o.line(Line{Kind: KindReport, Data: b, Text: fmt.Sprintf("run %s  topology %s  nodes %s  supervisor pid %d  converged in %.0f ms",
		in.Run, in.Topology, strings.Join(in.Nodes, ", "), in.PID, in.ConvergedMs)})
	for _, n := range in.Nodes {
		o.text("  %s on %s", n, in.Releases[n])
	}
	return nil
}

func (s *Server) teardown(o *out) error {
	s.act.Lock()
	defer s.act.Unlock()
	o.event(monoclock.Now(), "tearing down run %s", s.c.Run.ID)
	start := time.Now()
	if err := s.c.Stop(); err != nil {
		return fmt.Errorf("tear down run %s: %w", s.c.Run.ID, err)
	}
	o.event(monoclock.Now(), "run %s removed in %d ms (namespaces, programmers, BIRD containers, state dir)", s.c.Run.ID, time.Since(start).Milliseconds())
	return nil
}

// sorted emits events in time order.
type timed struct {
	mono int64
	text string
}

func emitSorted(o *out, evs []timed) {
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].mono < evs[j].mono })
	for _, e := range evs {
		o.event(e.mono, "%s", e.text)
	}
}
