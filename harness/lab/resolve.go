package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// resolveTimeout bounds one runtime or resolver command.
const resolveTimeout = 30 * time.Second

// Resolve returns the path of the namespace a reference names: the path
// itself, /proc/PID/ns/net of a container's PID (asked of its runtime), or
// what a command prints (a PID or a path). The path must exist.
func (m *Manifest) Resolve(ctx context.Context, r NetnsRef) (string, error) {
	var path string
	switch {
	case r.Path != "":
		path = r.Path
	case r.Container != "":
		rt := r.Runtime
		if rt == "" {
			rt = m.Runtime
		}
		pid, err := m.containerPID(ctx, rt, r.Container)
		if err != nil {
			return "", err
		}
		path = fmt.Sprintf("/proc/%d/ns/net", pid)
	case r.Command != "":
		out, err := runShell(ctx, r.Command, m.dir)
		if err != nil {
			return "", fmt.Errorf("netns command %q: %w", r.Command, err)
		}
		out = strings.TrimSpace(out)
		if pid, err := strconv.Atoi(out); err == nil && pid > 0 {
			path = fmt.Sprintf("/proc/%d/ns/net", pid)
		} else if filepath.IsAbs(out) {
			path = out
		} else {
			return "", fmt.Errorf("netns command %q printed %q: want a PID or an absolute path", r.Command, out)
		}
	default:
		return "", fmt.Errorf("empty netns reference")
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("network namespace %s: %w", path, err)
	}
	return path, nil
}

// containerPID asks the runtime for a running container's PID.
func (m *Manifest) containerPID(ctx context.Context, runtime, id string) (int, error) {
	var args []string
	switch runtime {
	case "docker", "podman":
		args = []string{runtime, "inspect", "--format", "{{.State.Pid}}", id}
	case "crictl":
		args = []string{"crictl", "inspect", "--output", "go-template", "--template", "{{.info.pid}}", id}
	case "runc":
		args = []string{"runc"}
		if m.RuncRoot != "" {
			args = append(args, "--root", m.RuncRoot)
		}
		args = append(args, "state", id)
	default:
		return 0, fmt.Errorf("container %q: runtime %q is not one of %s", id, runtime, strings.Join(Runtimes, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("container %q: %s: %w: %s", id, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	text := strings.TrimSpace(string(out))
	if runtime == "runc" {
		var st struct {
			PID    int    `json:"pid"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal(out, &st); err != nil {
			return 0, fmt.Errorf("container %q: runc state: %w", id, err)
		}
		if st.Status != "running" {
			return 0, fmt.Errorf("container %q: runc says it is %s, not running", id, st.Status)
		}
		text = strconv.Itoa(st.PID)
	}
	pid, err := strconv.Atoi(text)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("container %q: %s printed %q: want the PID of a running container", id, strings.Join(args, " "), text)
	}
	return pid, nil
}

// runShell runs a command with sh -c in dir and returns its stdout; the
// error carries its stderr.
func runShell(ctx context.Context, command, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
