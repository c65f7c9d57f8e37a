package control

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/poll"
	"github.com/birdcage/birdcage/report/results"
)

// actionContext is the context of an action that changes the cluster: it
// does not end when the client goes away (a half-done upgrade would leave
// the cluster in a state no scenario describes), only after wait.
func actionContext(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), wait)
}

// settle waits for the nodes' BIRDs to have every session Established and
// then for the whole cluster to be converged, reporting when each node's
// sessions were seen up.
func (s *Server) settle(ctx context.Context, o *out, nodes ...*harness.Node) error {
	for _, n := range nodes {
		if n.BIRD == nil || !n.BIRD.Running() {
			continue // a calico node's pod: WaitConverged waits for it
		}
		if err := n.BIRD.WaitEstablished(ctx); err != nil {
			return fmt.Errorf("BIRD on %s: %w", n.Name, err)
		}
		o.event(monoclock.Now(), "BIRD(%s) sessions Established (seen)", n.Name)
	}
	if err := s.c.WaitConverged(ctx); err != nil {
		return err
	}
	o.event(monoclock.Now(), "cluster converged (seen: every BIRD Established, every programmer synced)")
	return nil
}

func (s *Server) upgrade(ctx context.Context, req Request, o *out, wait time.Duration) error {
	n, err := s.node(req.Node)
	if err != nil {
		return err
	}
	if req.To == "" {
		return fmt.Errorf("upgrade %s: say --to RELEASE (%s)", n.Name, releases())
	}
	rel, err := config.ParseRelease(req.To)
	if err != nil {
		return err
	}
	sig, err := parseSignal(req.Signal)
	if err != nil {
		return err
	}
	s.act.Lock()
	defer s.act.Unlock()
	actx, cancel := actionContext(ctx, wait)
	defer cancel()
	from := n.Release()
	err = s.withEvents(o, func() error {
		if _, err := s.c.UpgradeNode(actx, n.Name, rel, harness.UpgradeOptions{Signal: sig, Programmer: req.Programmer, Calico: req.Calico}); err != nil {
			return err
		}
		return s.settle(actx, o, n)
	})
	if err != nil {
		return err
	}
	o.text("%s upgraded %s → %s (old BIRD got %s; new BIRD started with -R)", n.Name, from, n.Release(), signalName(sig))
	return nil
}

func releases() string {
	var rs []string
	for _, r := range config.Releases {
		rs = append(rs, string(r))
	}
	return strings.Join(rs, ", ")
}

func (s *Server) set(ctx context.Context, req Request, o *out, wait time.Duration) error {
	st := req.Settings
	s.act.Lock()
	defer s.act.Unlock()
	actx, cancel := actionContext(ctx, wait)
	defer cancel()
	cl, err := s.c.Store.Read(actx)
	if err != nil {
		return err
	}
	f, b := cl.Felix, cl.BGP
	if err := st.Apply(&f, &b); err != nil {
		return err
	}
	nodes := s.c.Nodes()
	renders := map[string]int{}
	restarts := map[string]int{}
	confd := map[string]int{}
	var model []*harness.Node // a calico node's Felix and confd read etcd, not the programmer's status
	for _, n := range nodes {
		if n.Calico == nil {
			model = append(model, n)
		}
	}
	for _, n := range model {
		renders[n.Name], restarts[n.Name], confd[n.Name] = n.Renders(), len(n.Programmer.Restarts()), len(n.ConfdActions())
	}
	var mark int64
	err = s.withEvents(o, func() error {
		if st.OnlyProgramClusterRoutes() {
			e, err := s.c.SetProgramClusterRoutes(actx, config.ProgramClusterRoutes(f.ProgramClusterRoutes), config.ProgramClusterRoutes(b.ProgramClusterRoutes))
			mark = e.Mono
			return err
		}
		mark = monoclock.Now()
		if len(st.BGP) > 0 {
			if _, err := s.c.Datastore().SetBGPConfig(actx, b); err != nil {
				return err
			}
		}
		if len(st.Felix) > 0 {
			_, err := s.c.Datastore().SetFelixConfig(actx, f)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The change has landed once every programmer runs with the new
	// effective value and has synced since, and every running BIRD's confd
	// has rendered the new documents.
	for _, n := range model {
		want := string(config.Resolve(f.ProgramClusterRoutes, n.Release(), config.Programmer, nil))
		if err := poll.Until(actx, 10*time.Millisecond, func() bool {
			ps, err := n.Programmer.Status()
			return err == nil && ps.ProgramClusterRoutes == want && ps.LastSyncMonotonicNano > mark && n.Programmer.Synced(mark)
		}); err != nil {
			return fmt.Errorf("waiting for %s's programmer on programClusterRoutes=%s: %w", n.Name, want, err)
		}
		if n.BIRD.Running() {
			if err := poll.Until(actx, 10*time.Millisecond, func() bool { return n.Renders() > renders[n.Name] }); err != nil {
				return fmt.Errorf("waiting for %s's confd to render the change: %w", n.Name, err)
			}
		}
	}
	var evs []timed
	for _, n := range model {
		for _, r := range n.Programmer.Restarts()[restarts[n.Name]:] {
			evs = append(evs, timed{r.ExitMono, fmt.Sprintf("programmer(%s) exited %d (%s)", n.Name, r.ExitCode, r.Reason)})
			if r.StartMono != 0 {
				evs = append(evs, timed{r.StartMono, fmt.Sprintf("programmer(%s) restarted", n.Name)})
			}
			if r.SyncedMono != 0 {
				evs = append(evs, timed{r.SyncedMono, fmt.Sprintf("programmer(%s) first sync: node unattended %.0f ms (exit → first sync)", n.Name, monoclock.Ms(r.SyncedMono-r.ExitMono))})
			}
		}
		for _, a := range n.ConfdActions()[confd[n.Name]:] {
			what := "birdc configure done"
			if a.Error != "" {
				what = "birdc configure FAILED: " + a.Error
			}
			evs = append(evs, timed{a.ConfiguredMono, fmt.Sprintf("confd(%s) %s, %.0f ms after the change", n.Name, what, monoclock.Ms(a.ConfiguredMono-mark))})
		}
	}
	emitSorted(o, evs)
	if err := s.settle(actx, o); err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Calico != nil {
			o.text("  %s (%s, calico): Felix and confd read the change from etcd", n.Name, n.Release())
			continue
		}
		ps, _ := n.Programmer.Status()
		o.text("  %s (%s): programmer programClusterRoutes=%s (IPIP %v, no-encap %v); BIRD programClusterRoutes=%s",
			n.Name, n.Release(), ps.ProgramClusterRoutes, ps.ProgramIPIPClusterRoutes, ps.ProgramNoEncapClusterRoutes,
			config.Resolve(b.ProgramClusterRoutes, n.Release(), config.BIRD, nil))
	}
	return nil
}

func (s *Server) bird(ctx context.Context, req Request, o *out, wait time.Duration) error {
	n, err := s.node(req.Node)
	if err != nil {
		return err
	}
	if n.Calico != nil {
		return fmt.Errorf("bird %s: %s runs Calico's own BIRD in its calico/node pod; the bird verb drives the model's BIRD only", n.Name, n.Name)
	}
	s.act.Lock()
	defer s.act.Unlock()
	actx, cancel := actionContext(ctx, wait)
	defer cancel()
	switch req.Action {
	case "kill":
		sig, err := parseSignal(req.Signal)
		if err != nil {
			return err
		}
		if !n.BIRD.Running() {
			return fmt.Errorf("BIRD on %s is not running (birdcage bird %s start)", n.Name, n.Name)
		}
		return s.withEvents(o, func() error { _, err := s.c.KillBIRD(actx, n.Name, sig); return err })
	case "start":
		if n.BIRD.Running() {
			return fmt.Errorf("BIRD on %s is already running (birdcage bird %s kill first)", n.Name, n.Name)
		}
		return s.withEvents(o, func() error {
			if _, err := s.c.StartBIRD(actx, n.Name, harness.StartBIRDOptions{Recovery: req.Recovery}); err != nil {
				return err
			}
			return s.settle(actx, o, n)
		})
	}
	return fmt.Errorf("bird %s %q: valid actions are kill and start", n.Name, req.Action)
}

func (s *Server) probeVerb(ctx context.Context, req Request, o *out) error {
	dur := 10 * time.Second
	if req.For != "" {
		d, err := time.ParseDuration(req.For)
		if err != nil || d <= 0 {
			return fmt.Errorf("--for %q: want a positive duration such as 10s", req.For)
		}
		dur = d
	}
	if req.Rate < 0 {
		return fmt.Errorf("--rate %d: want probes per second per flow (> 0)", req.Rate)
	}
	if !s.probe.TryLock() {
		return fmt.Errorf("a probe session is already running on run %s (one at a time: the sessions' flows would share addresses)", s.c.Run.ID)
	}
	defer s.probe.Unlock()
	sess, err := s.c.Probes(ctx, harness.ProbeOptions{Rate: req.Rate, MayNotFlow: true})
	if err != nil {
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, s.c.Machine.Wait(30*time.Second))
	err = sess.WaitFlowing(fctx)
	cancel()
	if err != nil {
		_ = sess.Close()
		return fmt.Errorf("probes never flowed (a gap table of no traffic proves nothing): %w", err)
	}
	rate := req.Rate
	if rate == 0 {
		rate = s.c.Machine.Rate()
	}
	flows := len(harness.EveryNodePair(s.c.Net))
	o.event(monoclock.Now(), "probing %d flows (every node pair, both ways) at %d/s each for %s", flows, rate, dur)
	err = s.withEvents(o, func() error {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		end := time.After(dur)
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-end:
				return nil
			case <-t.C:
				rep, err := sess.Report()
				if err != nil {
					return err
				}
				l := Line{Kind: KindLive, Mono: monoclock.Now(), Summary: summary(rep)}
				if req.Live {
					l.Text = results.GapTable(rep) + "(running: lost includes probes in flight)\n"
				}
				o.line(l)
			}
		}
	})
	if err != nil {
		_ = sess.Close()
		return err
	}
	rep, err := sess.Stop()
	if err != nil {
		return err
	}
	b, _ := json.Marshal(rep)
	o.line(Line{Kind: KindReport, Mono: monoclock.Now(), Text: results.GapTable(rep), Summary: summary(rep), Data: b})
	return nil
}

func summary(rep *probe.Report) string {
	t := rep.Total
	line := fmt.Sprintf("%d flows at %d/s: sent %d, received %d, lost %d (%d flows with loss), longest gap %.1f ms", t.Flows, rep.Rate, t.Sent, t.Received, t.Lost, t.FlowsWithLoss, t.LongestGapMs)
	if t.LongestGapFlow != "" {
		line += " on " + t.LongestGapFlow
	}
	return line
}
