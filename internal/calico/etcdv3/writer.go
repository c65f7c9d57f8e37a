package etcdv3

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/run"
)

// Writer keeps Calico's keys in an etcd in step with the cluster model.
//
// It owns only the keys it wrote: a sync writes a key whose value it would
// change and deletes a key it wrote before that the model no longer has.
// What Calico's own components write (calico-node's Node updates, Felix's
// status keys) it neither reads nor removes, so the two do not fight; a
// value the model still holds is written again only when the model's value
// changes.
type Writer struct {
	cli *clientv3.Client
	o   Options

	mu      sync.Mutex
	written map[string][]byte // key → the value this writer last stored
}

// NewWriter writes through cli. A zero Options.Created is now.
func NewWriter(cli *clientv3.Client, o Options) *Writer {
	if o.Created.IsZero() {
		o.Created = time.Now()
	}
	return &Writer{cli: cli, o: o, written: map[string][]byte{}}
}

// SyncReport says what one sync did.
type SyncReport struct {
	Put     []string // keys written, in key order
	Deleted []string // keys removed, in key order
	Dropped []string // model fields the release has no place for
}

// Sync maps c and writes the difference. Each key is its own write, as
// Calico's clients write them (no transaction spans resources), in key
// order; removals come last.
func (w *Writer) Sync(ctx context.Context, c *datastore.Cluster) (SyncReport, error) {
	m, err := Map(c, w.o)
	if err != nil {
		return SyncReport{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	rep := SyncReport{Dropped: m.Dropped}
	want := map[string]bool{}
	for _, kv := range m.KVs {
		want[kv.Key] = true
		if old, ok := w.written[kv.Key]; ok && equalValue(old, kv.Value) {
			continue
		}
		if _, err := w.cli.Put(ctx, kv.Key, string(kv.Value)); err != nil {
			return rep, fmt.Errorf("etcd put %s: %w", kv.Key, err)
		}
		w.written[kv.Key] = kv.Value
		rep.Put = append(rep.Put, kv.Key)
	}
	var gone []string
	for k := range w.written {
		if !want[k] {
			gone = append(gone, k)
		}
	}
	slices.Sort(gone)
	for _, k := range gone {
		if _, err := w.cli.Delete(ctx, k); err != nil {
			return rep, fmt.Errorf("etcd delete %s: %w", k, err)
		}
		delete(w.written, k)
		rep.Deleted = append(rep.Deleted, k)
	}
	return rep, nil
}

// Follow syncs the store's cluster into etcd now and after every change the
// store signals, until ctx ends: a live configuration change (an operator's
// programClusterRoutes edit, a block moving) reaches etcd, and so Calico's
// components, as it reaches the model's. The first sync's error is
// returned; later errors (an invalid document, etcd unreachable) go to
// onSync with the report, and the next change tries again. The returned
// channel closes once following has stopped after ctx ended; onSync is not
// called after that, nor once ctx has ended.
func (w *Writer) Follow(ctx context.Context, s datastore.Store, onSync func(SyncReport, error)) (<-chan struct{}, error) {
	changes, err := s.Watch(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch datastore: %w", err)
	}
	sync := func() (SyncReport, error) {
		c, err := s.Read(ctx)
		if err != nil {
			return SyncReport{}, fmt.Errorf("read datastore: %w", err)
		}
		return w.Sync(ctx, c)
	}
	rep, err := sync()
	if onSync != nil {
		onSync(rep, err)
	}
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-changes:
				if !ok {
					return
				}
				rep, err := sync()
				if onSync != nil && ctx.Err() == nil {
					onSync(rep, err)
				}
			}
		}
	}()
	return done, nil
}

// Serve is the datastore of one cluster in one call: it starts the member
// (Start), connects a writer through its unix socket and keeps etcd in step
// with store (Follow) until r closes. onSync, if not nil, hears every sync.
func Serve(ctx context.Context, r *run.Run, store datastore.Store, so ServerOptions, o Options, onSync func(SyncReport, error)) (*Server, error) {
	srv, err := Start(ctx, r, so)
	if err != nil {
		return nil, err
	}
	cli, err := srv.Client()
	if err != nil {
		return nil, err
	}
	followCtx, stop := context.WithCancel(context.Background())
	var following <-chan struct{}
	// Registered after the member, so it runs first: the writer stops, and
	// is waited for, before the member it writes to.
	r.DeferLocal("etcd writer", func() error {
		stop()
		if following != nil {
			<-following
		}
		return cli.Close()
	})
	following, err = NewWriter(cli, o).Follow(followCtx, store, onSync)
	if err != nil {
		return nil, fmt.Errorf("datastore %s: %w", srv.Endpoint, err)
	}
	return srv, nil
}
