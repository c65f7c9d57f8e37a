package etcdv3

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/birdcage/birdcage/internal/run"
)

// DefaultClientPort is etcd's client port; the peer port is the next one.
const DefaultClientPort = 2379

// ServerOptions say where the datastore listens.
type ServerOptions struct {
	// NetNS is the path of the network namespace whose address Listen is
	// (a control-plane host on the underlay, /var/run/netns/<prefix>cp);
	// empty listens in this process's own namespace.
	NetNS string
	// Listen is the address Calico's components dial
	// (ETCD_ENDPOINTS=http://Listen). Required; port 0 means 2379. The
	// peer listener (one member, so never dialled) takes the next port.
	Listen netip.AddrPort
	// Name names this datastore inside the run (its directory
	// <run dir>/<Name>); empty means "etcd".
	Name string
	// StartTimeout bounds the wait for the member to serve; zero means 30s.
	StartTimeout time.Duration
}

// Server is one embedded etcd member serving Calico's datastore.
type Server struct {
	// Endpoint is the URL Calico's components are given
	// (ETCD_ENDPOINTS), reachable from any namespace that routes to Listen.
	Endpoint string
	// Socket is a unix socket on the same member, for the harness: it
	// reaches the datastore from any namespace of this machine, as an
	// operator's etcdctl on the control-plane host does.
	Socket string
	// Dir holds the member's data and its log (etcd.log).
	Dir string

	e        *embed.Etcd
	stopOnce sync.Once
}

// Start creates <run dir>/<Name>, starts an etcd member listening on
// o.Listen inside o.NetNS and waits until it serves. Both are registered
// with r the moment they exist: the directory is removed when r closes
// (and is found by `birdcage clean` under the run's dir after a crash),
// the member stops when r closes or this process ends.
func Start(ctx context.Context, r *run.Run, o ServerOptions) (*Server, error) {
	if !o.Listen.Addr().IsValid() {
		return nil, errors.New("etcd server options: Listen: want the client address Calico's components dial (for example 10.0.0.250:2379)")
	}
	if o.Listen.Port() == 0 {
		o.Listen = netip.AddrPortFrom(o.Listen.Addr(), DefaultClientPort)
	}
	if o.Name == "" {
		o.Name = "etcd"
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 30 * time.Second
	}
	dir := r.Path(o.Name)
	if err := r.Guard("etcd dir "+dir, func() error { return os.RemoveAll(dir) }); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcd dir: %w", err)
	}
	s := &Server{
		Endpoint: "http://" + o.Listen.String(),
		Socket:   filepath.Join(dir, "client.sock"),
		Dir:      dir,
	}

	cfg := embed.NewConfig()
	cfg.Name = r.Name(o.Name) // the member's name carries the run's prefix
	cfg.Dir = filepath.Join(dir, "data")
	client := url.URL{Scheme: "http", Host: o.Listen.String()}
	peer := url.URL{Scheme: "http", Host: netip.AddrPortFrom(o.Listen.Addr(), o.Listen.Port()+1).String()}
	cfg.ListenClientUrls = []url.URL{client, {Scheme: "unix", Path: s.Socket}}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	// The HTTP gateway dials the gRPC server from a goroutine of this
	// process, which is not in o.NetNS; Calico speaks gRPC anyway.
	cfg.EnableGRPCGateway = false
	cfg.Logger = "zap"
	cfg.LogLevel = "info"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}

	// The listeners are opened inside StartEtcd, on the calling thread:
	// opened there inside o.NetNS, they stay in it, while the member's
	// goroutines run anywhere.
	start := func() error {
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			return err
		}
		s.e = e
		return nil
	}
	var err error
	if o.NetNS == "" {
		err = start()
	} else {
		err = ns.WithNetNSPath(o.NetNS, func(ns.NetNS) error { return start() })
	}
	if err != nil {
		return nil, fmt.Errorf("start etcd on %s (netns %q): %w (log: %s)", s.Endpoint, o.NetNS, err, cfg.LogOutputs[0])
	}
	r.DeferLocal("etcd "+cfg.Name, func() error { s.Stop(); return nil })

	t := time.NewTimer(o.StartTimeout)
	defer t.Stop()
	select {
	case <-s.e.Server.ReadyNotify():
		return s, nil
	case err := <-s.e.Err():
		return nil, fmt.Errorf("etcd %s: %w (log: %s)", cfg.Name, err, cfg.LogOutputs[0])
	case <-t.C:
		return nil, fmt.Errorf("etcd %s: not serving after %s (log: %s)", cfg.Name, o.StartTimeout, cfg.LogOutputs[0])
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Client is an etcd client on the server's unix socket; the caller closes it.
func (s *Server) Client() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"unix://" + s.Socket},
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(), // its retries end in the errors it returns
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client on %s: %w", s.Socket, err)
	}
	return cli, nil
}

// Env is what a Calico component needs to find this datastore
// (libcalico-go's apiconfig: DATASTORE_TYPE, ETCD_ENDPOINTS).
func (s *Server) Env() []string {
	return []string{"DATASTORE_TYPE=etcdv3", "ETCD_ENDPOINTS=" + s.Endpoint}
}

// Stop stops the member now; the run's Close does the same, and a second
// stop does nothing.
func (s *Server) Stop() { s.stopOnce.Do(s.e.Close) }
