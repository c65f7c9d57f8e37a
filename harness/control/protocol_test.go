package control

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSupervisor answers one request with lines, then closes.
func fakeSupervisor(t *testing.T, lines ...Line) (string, <-chan Request) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), SocketName)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan Request, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		var req Request
		if json.NewDecoder(conn).Decode(&req) == nil {
			got <- req
		}
		enc := json.NewEncoder(conn)
		for _, l := range lines {
			_ = enc.Encode(l)
		}
	}()
	return sock, got
}

func TestDoStreamsLinesAndEndsOnStatus(t *testing.T) {
	sock, got := fakeSupervisor(t,
		Line{Kind: KindEvent, Mono: 5, RunMs: 1.5, Text: "UpgradeNode(node-2→3.33)"},
		Line{Kind: KindText, Text: "done"},
		Line{Kind: KindStatus, OK: true},
		Line{Kind: KindText, Text: "after the status: never read"})
	var seen []string
	err := Do(context.Background(), sock, Request{Verb: "upgrade", Node: "node-2", To: "3.33"}, func(l Line) error {
		seen = append(seen, l.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(seen, "|") != "UpgradeNode(node-2→3.33)|done" {
		t.Errorf("lines: %q", seen)
	}
	if req := <-got; req.Verb != "upgrade" || req.Node != "node-2" || req.To != "3.33" {
		t.Errorf("request: %+v", req)
	}
}

func TestDoErrors(t *testing.T) {
	sock, _ := fakeSupervisor(t, Line{Kind: KindStatus, Error: `run abc123 has no node "node-9"; its nodes are node-1, node-2`})
	err := Do(context.Background(), sock, Request{Verb: "upgrade"}, func(Line) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "its nodes are node-1, node-2") {
		t.Errorf("status error: %v", err)
	}
	// A reply that ends without a status is an error, not success.
	sock, _ = fakeSupervisor(t, Line{Kind: KindText, Text: "half"})
	err = Do(context.Background(), sock, Request{Verb: "info"}, func(Line) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "without a status") {
		t.Errorf("no status: %v", err)
	}
	// No socket: the no-cluster message.
	err = Do(context.Background(), filepath.Join(t.TempDir(), SocketName), Request{Verb: "info"}, func(Line) error { return nil })
	if !errors.Is(err, ErrNoCluster) || !strings.Contains(err.Error(), "birdcage up --cluster") {
		t.Errorf("no socket: %v", err)
	}
}
