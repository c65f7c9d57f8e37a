package lab

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/birdcage/birdcage/internal/monoclock"
)

// ActionTimeout bounds one action command.
const ActionTimeout = 5 * time.Minute

// Command is an action's command line with its placeholders filled in,
// each value shell-quoted. A placeholder the action may use but vars lacks
// is an error naming it.
func (m *Manifest) Command(act Action, vars map[string]string) (string, error) {
	tmpl := m.Actions.Template(act)
	if tmpl == "" {
		return "", fmt.Errorf("lab manifest %q: actions.%s: not provided", m.source, act)
	}
	vals := map[string]string{"manifestDir": m.dir}
	for k, v := range vars {
		vals[k] = v
	}
	var missing []string
	out := placeholder.ReplaceAllStringFunc(tmpl, func(s string) string {
		k := s[1 : len(s)-1]
		v, ok := vals[k]
		if !ok {
			missing = append(missing, "{"+k+"}")
			return s
		}
		return shellQuote(v)
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return "", fmt.Errorf("lab manifest %q: actions.%s: no value for %s", m.source, act, strings.Join(missing, ", "))
	}
	return out, nil
}

// shellQuote makes s one sh word.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Ran is one action command that ran: its command line, output, and when
// it began and ended on the harness's monotonic clock.
type Ran struct {
	Action    Action
	Command   string
	Output    string
	BeginMono int64
	EndMono   int64
}

// Run runs an action's command (sh -c, in the manifest's directory) and
// returns what it printed; a non-zero exit is an error carrying its output.
func (m *Manifest) Run(ctx context.Context, act Action, vars map[string]string) (Ran, error) {
	line, err := m.Command(act, vars)
	if err != nil {
		return Ran{Action: act}, err
	}
	ctx, cancel := context.WithTimeout(ctx, ActionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = m.dir
	r := Ran{Action: act, Command: line, BeginMono: monoclock.Now()}
	out, err := cmd.CombinedOutput()
	r.EndMono, r.Output = monoclock.Now(), string(out)
	if err != nil {
		return r, fmt.Errorf("lab action %s: %s: %w\n%s", act, line, err, strings.TrimSpace(r.Output))
	}
	return r, nil
}
