package judge

// The platform-loss rule's logic on constructed reports: the controls' loss
// measured, and the verdict for a judged flow against it — strict where the
// controls lost nothing, bounded by the worst control otherwise.

import (
	"strings"
	"testing"

	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/internal/machine"
)

func TestPlatformLossRule(t *testing.T) {
	// The tolerance exists only where the platform stalls.
	const stalls = true
	type loss struct {
		holes     uint64
		longestMs float64
	}
	for _, c := range []struct {
		name     string
		controls []loss // each control flow's holes and longest outage
		victim   loss
		want     bool
	}{
		{"controls clean, victim clean", []loss{{0, 5}, {0, 6}, {0, 5}}, loss{0, 6}, true},
		{"controls clean, victim lost one: strict, a hole", []loss{{0, 5}, {0, 5}, {0, 5}}, loss{1, 10}, false},
		{"controls clean, victim lost many", []loss{{0, 5}, {0, 5}}, loss{400, 2000}, false},
		{"one stall on every flow, victim lost as much", []loss{{20, 105}, {18, 98}, {21, 110}}, loss{21, 108}, true},
		{"one stall, victim lost less", []loss{{20, 105}, {18, 98}, {21, 110}}, loss{5, 30}, true},
		{"one stall, victim clean", []loss{{20, 105}, {18, 98}, {21, 110}}, loss{0, 5}, true},
		{"one stall, victim hit once more than the worst control", []loss{{20, 105}, {18, 98}, {21, 110}}, loss{42, 112}, true},
		{"one stall, victim lost more than one more stall's worth", []loss{{20, 105}, {18, 98}, {21, 110}}, loss{44, 112}, false},
		{"a 14 s stall storm as CI saw it: victims within one outage of the worst control", []loss{{2773, 620.5}, {2745, 572}, {2760, 560}}, loss{2820, 546.5}, true},
		{"the same storm, a victim with a 2 s hole as well", []loss{{2773, 620.5}, {2745, 572}, {2760, 560}}, loss{3173, 2000}, false},
		{"one stall, victim's outage a little longer", []loss{{20, 105}, {18, 98}}, loss{20, 114}, true},
		{"many stalls: victim's outage 1.29× the controls' longest, as seen in the VM", []loss{{650, 129}, {600, 120}}, loss{625, 166}, true},
		{"many stalls: victim's outage more than twice the controls' longest", []loss{{650, 129}, {600, 120}}, loss{300, 290}, false},
		{"one control lost: the bound is that control's", []loss{{0, 5}, {0, 6}, {14, 75}}, loss{14, 75}, true},
		{"one control lost a little, victim a real window", []loss{{0, 5}, {3, 20}, {0, 5}}, loss{396, 1980}, false},
		{"a starved guest: many short losses everywhere, victim one long outage of fewer probes", []loss{{600, 320}, {620, 300}, {500, 140}}, loss{300, 1500}, false},
		{"a starved guest: victim's losses as short and as many as the controls'", []loss{{600, 320}, {620, 300}, {500, 140}}, loss{580, 310}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var hs []FlowHoles
			for i, h := range c.controls {
				hs = append(hs, FlowHoles{Flow: string(rune('a'+i)) + "->z", Holes: h.holes, LongestMs: h.longestMs, IntervalMs: 5})
			}
			p, err := PlatformLossOf(hs, stalls)
			if err != nil {
				t.Fatal(err)
			}
			v := FlowHoles{Flow: "v->a", Holes: c.victim.holes, LongestMs: c.victim.longestMs, IntervalMs: 5}
			if got := WithinPlatform(v, p); got != c.want {
				t.Errorf("victim %+v against %s: %v, want %v", c.victim, p, got, c.want)
			}
			// The same verdict through the matchers: a session's flow and a
			// window's count.
			f := flow("v->a", 1000, 1000-c.victim.holes, 1, 1000, c.victim.holes)
			f.LongestGapMs = c.victim.longestMs
			if got := match(t, HaveNoGap().BeyondPlatform(p), f); got != verdict(c.want) {
				t.Errorf("HaveNoGap().BeyondPlatform: %s, want %s: %s", got, verdict(c.want), HaveNoGap().BeyondPlatform(p).FailureMessage(f))
			}
			if got := match(t, BeWithinPlatformLoss(p), v); got != verdict(c.want) {
				t.Errorf("BeWithinPlatformLoss: %s, want %s: %s", got, verdict(c.want), BeWithinPlatformLoss(p).FailureMessage(v))
			}
		})
	}
}

func verdict(ok bool) string {
	if ok {
		return "pass"
	}
	return "fail"
}

// Natively (and under KVM) a control that lost anything fails the run; a
// clean control natively gives the strict rule. Under TCG the same loss is
// the platform's (positive control).
func TestDirtyControlsFailWhereThePlatformDoesNotStall(t *testing.T) {
	dirty := []FlowHoles{{Flow: "c->d", IntervalMs: 1}, {Flow: "d->c", Holes: 3, LongestMs: 4, IntervalMs: 1}}
	for _, accel := range []string{"", "kvm"} {
		stalls := machine.Profile{Accel: accel}.Stalls()
		if _, err := PlatformLossOf(dirty, stalls); err == nil || !strings.Contains(err.Error(), "control flow d->c lost 3 probes") {
			t.Errorf("accelerator %q: a dirty control gave %v, want an error naming it", accel, err)
		}
		if p, err := PlatformLossOf(dirty[:1], stalls); err != nil || !p.Strict() {
			t.Errorf("accelerator %q: clean controls: %+v, %v; want the strict rule", accel, p, err)
		}
	}
	if p, err := PlatformLossOf(dirty, machine.Profile{Accel: "tcg"}.Stalls()); err != nil || p.Max != 3 || !p.Stalls {
		t.Errorf("tcg: %+v, %v; want the platform's loss measured", p, err)
	}
}

func TestPlatformLossMeasure(t *testing.T) {
	const stalls = true // a TCG guest
	t.Run("no control is an error, not a zero", func(t *testing.T) {
		if _, err := PlatformLossOf(nil, stalls); err == nil {
			t.Error("no control flow: want an error")
		}
	})
	t.Run("the platform's figures and its statement", func(t *testing.T) {
		p, err := PlatformLossOf([]FlowHoles{{Flow: "c->d"}, {Flow: "d->c", Holes: 30, LongestMs: 150}, {Flow: "e->c", Holes: 12, LongestMs: 160}}, stalls)
		if err != nil {
			t.Fatal(err)
		}
		if p.Controls != 3 || p.LostFlows != 2 || p.Max != 30 || p.MaxFlow != "d->c" || p.Total != 42 || p.LongestMs != 160 || p.LongestFlow != "e->c" || p.Strict() {
			t.Errorf("got %+v", p)
		}
		if s := p.String(); !strings.Contains(s, "up to 30") || !strings.Contains(s, "d->c") {
			t.Errorf("statement: %s", s)
		}
		clean, _ := PlatformLossOf([]FlowHoles{{Flow: "c->d"}}, stalls)
		if s := clean.String(); !clean.Strict() || !strings.Contains(s, "strictly") {
			t.Errorf("clean platform statement: %s", s)
		}
	})
	t.Run("a session's holes: head, below the highest, and the tail before the snapshot", func(t *testing.T) {
		head := flow("a->b", 1000, 900, 101, 1000, 0) // 100 never arrived
		mid := flow("b->a", 1000, 995, 1, 1000, 5)
		tail := flow("c->a", 1000, 800, 1, 800, 0) // 100 of them sent by the snapshot
		none := flow("a->c", 50, 0, 0, 0, 0)
		rep := &probe.Report{Flows: []probe.GapReport{head, mid, tail, none}}
		snap := &probe.Report{Flows: []probe.GapReport{flow("a->b", 900, 800, 101, 900, 0), flow("b->a", 900, 895, 1, 900, 5),
			flow("c->a", 900, 800, 1, 800, 0), flow("a->c", 40, 0, 0, 0, 0)}}
		hs, err := Holes(rep, WholeSession(snap), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []uint64{100, 5, 100, 50}
		for i, h := range hs {
			if h.Holes != want[i] {
				t.Errorf("%s: %d holes, want %d", h.Flow, h.Holes, want[i])
			}
		}
		only, err := Holes(rep, WholeSession(nil), func(f probe.GapReport) bool { return f.Flow == "c->a" })
		if err != nil || len(only) != 1 || only[0].Holes != 0 {
			t.Errorf("keep, no snapshot: %v %v (a tail without a snapshot is in flight, not a hole)", only, err)
		}
		if _, err := Holes(rep, WholeSession(&probe.Report{Flows: []probe.GapReport{head}}), nil); err == nil {
			t.Error("a flow missing from the snapshot: want an error")
		}
	})
	t.Run("a window's holes count the runs that began in it", func(t *testing.T) {
		f := flow("a->b", 1000, 970, 1, 1000, 30)
		f.Delivery = &probe.Delivery{}
		f.Disruptions = []probe.Disruption{{Lost: 10, StartNs: 100, EndNs: 100 + 45e6}, {Lost: 20, StartNs: 500, EndNs: 500 + 95e6}}
		f.DisruptionCount = 2
		rep := &probe.Report{Flows: []probe.GapReport{f}}
		rep.Rate = 200
		for _, w := range []struct {
			from, to  int64
			want      uint64
			longestMs float64
		}{{0, 100, 0, 0}, {100, 500, 10, 45}, {0, 1000, 30, 95}, {500, 501, 20, 95}} {
			hs, err := Holes(rep, SentBetween(w.from, w.to), nil)
			if err != nil || hs[0].Holes != w.want || hs[0].LongestMs != w.longestMs || hs[0].IntervalMs != 5 {
				t.Errorf("[%d, %d): %+v %v, want %d holes, longest %.0f ms", w.from, w.to, hs, err, w.want, w.longestMs)
			}
		}
		f.DisruptionCount = 70
		if _, err := Holes(&probe.Report{Flows: []probe.GapReport{f}}, SentBetween(0, 1000), nil); err == nil {
			t.Error("more disruptions than listed: want an error")
		}
	})
	t.Run("refused sends stay strict when the platform lost probes", func(t *testing.T) {
		p, _ := PlatformLossOf([]FlowHoles{{Flow: "c->d", Holes: 50, LongestMs: 250}}, stalls)
		f := flow("a->b", 1000, 1000, 1, 1000, 0)
		f.SendErrors = map[string]uint64{"EHOSTUNREACH": 2}
		if got := match(t, HaveNoGap().BeyondPlatform(p), f); got != "fail" {
			t.Errorf("refused sends against a lossy platform: %s, want fail", got)
		}
		if msg := HaveNoGap().BeyondPlatform(p).FailureMessage(flow("a->b", 1000, 900, 1, 1000, 100)); !strings.Contains(msg, "more than the platform") || !strings.Contains(msg, "up to 50") || !strings.Contains(msg, "250.0 ms") {
			t.Errorf("message: %s", msg)
		}
	})
}

func TestHolesSince(t *testing.T) {
	// At the change: a lost head (13 probes) and 2 missing; by the end 11
	// more missing in one run after the change, and a tail still in flight.
	at := &probe.Report{EndNs: 1000, Rate: 50, Flows: []probe.GapReport{flow("a->b", 100, 85, 14, 100, 2)}}
	end := flow("a->b", 400, 372, 14, 398, 13)
	end.Delivery = &probe.Delivery{}
	end.Disruptions = []probe.Disruption{{Lost: 13, StartNs: 10, EndNs: 10 + 240e6}, {Lost: 2, StartNs: 500}, {Lost: 11, StartNs: 2000, EndNs: 2000 + 200e6}}
	end.DisruptionCount = 3
	end.LongestGapMs = 692
	rep := &probe.Report{Rate: 50, Flows: []probe.GapReport{end}}
	through := &probe.Report{Flows: []probe.GapReport{flow("a->b", 398, 372, 14, 398, 13)}}
	hs, err := Holes(rep, SinceSnapshot(at, through), nil)
	if err != nil {
		t.Fatal(err)
	}
	if hs[0].Holes != 11 || hs[0].LongestMs != 200 {
		t.Errorf("got %+v, want the 11 lost after the change in a 200 ms run (the head's 692 ms gap was before it)", hs[0])
	}
	rep.Flows[0].DisruptionCount = 80
	hs, err = Holes(rep, SinceSnapshot(at, through), nil)
	if err != nil || hs[0].LongestMs != 692 {
		t.Errorf("disruptions not all listed: %+v %v, want the session's longest gap", hs, err)
	}
	if _, err := Holes(rep, SinceSnapshot(nil, through), nil); err == nil {
		t.Error("no snapshot: want an error")
	}
}
