package caliconode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Open is OpenSource for a directory, and for an image reference
// (calico/node:v3.33.0) the image's root filesystem exported through
// docker or podman into a cache directory first (ExportImage).
func Open(ctx context.Context, src string) (Source, error) {
	if !IsImageRef(src) {
		return OpenSource(src)
	}
	dir, err := ExportImage(ctx, src, DefaultImageCache())
	if err != nil {
		return Source{}, err
	}
	return OpenSource(dir)
}

// imageRefRe is a container image reference as docker and podman take it:
// [registry[:port]/]path[:tag][@digest].
var imageRefRe = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._/-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`)

// IsImageRef says whether src names an image rather than a directory: it
// is no existing path, does not start like a path (/, ./, ../, ~), and
// reads as an image reference.
func IsImageRef(src string) bool {
	if src == "" || strings.HasPrefix(src, "/") || strings.HasPrefix(src, ".") || strings.HasPrefix(src, "~") {
		return false
	}
	if _, err := os.Stat(src); err == nil {
		return false
	}
	return imageRefRe.MatchString(src)
}

// DefaultImageCache is where exported images go: the user's cache
// directory's birdcage/calico (root: /root/.cache/birdcage/calico).
func DefaultImageCache() string {
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "birdcage", "calico")
}

// ErrNoImageTool says neither docker nor podman is on PATH.
var ErrNoImageTool = errors.New("neither docker nor podman is on PATH")

// ImageTool is the first of docker and podman on PATH.
func ImageTool() (string, error) {
	for _, t := range []string{"docker", "podman"} {
		if p, err := exec.LookPath(t); err == nil {
			return p, nil
		}
	}
	return "", ErrNoImageTool
}

// exportMarker is written into an export once it is complete.
const exportMarker = ".birdcage-exported"

// ExportPlan is how ExportImage exports ref with tool: the commands, in
// order, with CONTAINER standing for the id the create command prints.
type ExportPlan struct {
	// ID prints the image's id (it fails when the image is not local).
	ID []string
	// Pull fetches the image when ID failed.
	Pull []string
	// Create makes a stopped container of the image (never started: the
	// command given only satisfies images without one, such as those
	// `docker import` makes).
	Create []string
	// Export writes the container's filesystem to a tar file.
	Export []string
	// Remove deletes the container.
	Remove []string
}

// PlanExport is the commands that export ref's root filesystem to tarPath.
func PlanExport(tool, ref, tarPath string) ExportPlan {
	return ExportPlan{
		ID:     []string{tool, "image", "inspect", "--format", "{{.Id}}", ref},
		Pull:   []string{tool, "pull", ref},
		Create: []string{tool, "create", ref, "/birdcage-export-only"},
		Export: []string{tool, "export", "-o", tarPath, "CONTAINER"},
		Remove: []string{tool, "rm", "CONTAINER"},
	}
}

// cacheName is ref and its image id as one directory name: no ':' or ','
// (the path becomes an overlay layer) and no '/'.
func cacheName(ref, id string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
				return r
			}
			return '_'
		}, s)
	}
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return clean(ref) + "@" + clean(id)
}

// ExportImage exports the image ref's root filesystem through docker or
// podman into cache/<ref>@<image id>, reusing a complete earlier export
// of the same image, and returns the directory. Without docker or podman
// the error says so and how to export by hand.
func ExportImage(ctx context.Context, ref, cache string) (string, error) {
	tool, err := ImageTool()
	if err != nil {
		return "", fmt.Errorf("calico source %q: not a directory, so an image reference; exporting an image needs docker or podman, and %w: install one, or export the image elsewhere (docker export, podman export, crane export) and give the directory", ref, err)
	}
	// The answer is stdout's (docker create warns on stderr); an error
	// carries stderr.
	run := func(argv []string) (string, error) {
		var stderr strings.Builder
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("calico source %q: %s: %w: %s", ref, strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(string(out)), nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("calico source %q: image cache: %w", ref, err)
	}
	plan := PlanExport(tool, ref, "")
	id, err := run(plan.ID)
	if err != nil {
		if _, perr := run(plan.Pull); perr != nil {
			return "", fmt.Errorf("%w (and pulling it: %v)", err, perr)
		}
		if id, err = run(plan.ID); err != nil {
			return "", err
		}
	}
	dest := filepath.Join(cache, cacheName(ref, id))
	if exists(filepath.Join(dest, exportMarker)) {
		return dest, nil
	}
	tmp, err := os.MkdirTemp(cache, "export-")
	if err != nil {
		return "", fmt.Errorf("calico source %q: %w", ref, err)
	}
	defer os.RemoveAll(tmp)
	tarPath := filepath.Join(tmp, "rootfs.tar")
	plan = PlanExport(tool, ref, tarPath)
	cid, err := run(plan.Create)
	if err != nil {
		return "", err
	}
	withID := func(argv []string) []string {
		out := append([]string(nil), argv...)
		for i, a := range out {
			if a == "CONTAINER" {
				out[i] = cid
			}
		}
		return out
	}
	_, exportErr := run(withID(plan.Export))
	if _, err := run(withID(plan.Remove)); err != nil && exportErr == nil {
		exportErr = err
	}
	if exportErr != nil {
		return "", exportErr
	}
	root := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(root, 0o755); err != nil {
		return "", err
	}
	if _, err := run([]string{"tar", "-x", "-f", tarPath, "-C", root, "--numeric-owner"}); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(root, exportMarker), []byte(ref+" "+id+"\n"), 0o644); err != nil {
		return "", err
	}
	os.RemoveAll(dest) // an incomplete earlier export
	if err := os.Rename(root, dest); err != nil {
		return "", fmt.Errorf("calico source %q: %w", ref, err)
	}
	return dest, nil
}
