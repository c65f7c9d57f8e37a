package datastore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Kinds lists every document kind, which is also every subdirectory of a
// DirStore.
var Kinds = []Kind{KindIPPool, KindNode, KindBlockAffinity, KindWorkload, KindBGPPeer,
	KindFelixConfiguration, KindBGPConfiguration}

// IsSingleton reports whether the kind has exactly one document, named
// SingletonName.
func (k Kind) IsSingleton() bool {
	return k == KindFelixConfiguration || k == KindBGPConfiguration
}

// docType is the Go type of one document of the kind.
func (k Kind) docType() (reflect.Type, error) {
	switch k {
	case KindIPPool:
		return reflect.TypeFor[IPPool](), nil
	case KindNode:
		return reflect.TypeFor[Node](), nil
	case KindBlockAffinity:
		return reflect.TypeFor[BlockAffinity](), nil
	case KindWorkload:
		return reflect.TypeFor[Workload](), nil
	case KindBGPPeer:
		return reflect.TypeFor[BGPPeer](), nil
	case KindFelixConfiguration:
		return reflect.TypeFor[FelixConfiguration](), nil
	case KindBGPConfiguration:
		return reflect.TypeFor[BGPConfiguration](), nil
	}
	return nil, fmt.Errorf("kind %q: valid kinds are %s", k, kindNames())
}

func kindNames() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// DefaultWatchResync is how often Watch re-reads the directory as a safety
// net for inotify events it might have missed.
const DefaultWatchResync = 2 * time.Second

// watchQuiet is how long Watch waits after an event for more before it
// signals, so a burst of writes gives one signal.
const watchQuiet = 20 * time.Millisecond

// DirStore is the embedded Store: one JSON file per document at
// <Dir>/<kind>/<name>.json. Writers write a temp file in the same directory
// and rename it, so a reader sees the old or the new document, never half.
type DirStore struct {
	Dir string
	// WatchResync is the safety-net re-read interval of Watch
	// (DefaultWatchResync when zero).
	WatchResync time.Duration
	// Log receives watch problems; slog.Default() when nil.
	Log *slog.Logger
}

var _ Store = (*DirStore)(nil)

// OpenDir returns a DirStore on dir, creating dir and every kind
// subdirectory if missing.
func OpenDir(dir string) (*DirStore, error) {
	for _, k := range Kinds {
		if err := os.MkdirAll(filepath.Join(dir, string(k)), 0o755); err != nil {
			return nil, fmt.Errorf("open datastore %s: %w", dir, err)
		}
	}
	return &DirStore{Dir: dir}, nil
}

func (s *DirStore) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// Path returns the file a document lives in.
func (s *DirStore) Path(kind Kind, name string) string {
	if kind.IsSingleton() {
		name = SingletonName
	}
	return filepath.Join(s.Dir, string(kind), name+".json")
}

// isDocumentFile reports whether a directory entry is a document: *.json and
// not hidden (temp files are hidden).
func isDocumentFile(name string) bool {
	return strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, ".")
}

// Read implements Store.
func (s *DirStore) Read(ctx context.Context) (*Cluster, error) {
	c := &Cluster{}
	var blockNames []string
	for _, kind := range Kinds {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dir := filepath.Join(s.Dir, string(kind))
		ents, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read datastore %s: %w", dir, err)
		}
		for _, e := range ents {
			if e.IsDir() || !isDocumentFile(e.Name()) {
				continue
			}
			name := strings.TrimSuffix(e.Name(), ".json")
			path := filepath.Join(dir, e.Name())
			if kind.IsSingleton() && name != SingletonName {
				return nil, &DocumentError{Path: path, Err: fmt.Errorf("a %s document must be named %q (%s.json)", kind, SingletonName, SingletonName)}
			}
			b, err := os.ReadFile(path)
			if errors.Is(err, os.ErrNotExist) {
				continue // deleted between ReadDir and ReadFile; the watch signals again
			}
			if err != nil {
				return nil, fmt.Errorf("read datastore %s: %w", path, err)
			}
			doc, err := decodeDocument(kind, name, b)
			if err != nil {
				return nil, &DocumentError{Path: path, Err: err}
			}
			switch d := doc.(type) {
			case *IPPool:
				c.Pools = append(c.Pools, *d)
			case *Node:
				c.Nodes = append(c.Nodes, *d)
			case *BlockAffinity:
				c.Blocks = append(c.Blocks, *d)
				blockNames = append(blockNames, name)
			case *Workload:
				c.Workloads = append(c.Workloads, *d)
			case *BGPPeer:
				c.Peers = append(c.Peers, *d)
			case *FelixConfiguration:
				c.Felix = *d
			case *BGPConfiguration:
				c.BGP = *d
			}
		}
	}
	if err := validateCluster(c, blockNames, s.Path); err != nil {
		return nil, err
	}
	return c, nil
}

// named is a document with a Name field that must match its file name.
type named interface{ docName() *string }

func (p *IPPool) docName() *string   { return &p.Name }
func (n *Node) docName() *string     { return &n.Name }
func (w *Workload) docName() *string { return &w.Name }
func (p *BGPPeer) docName() *string  { return &p.Name }

type validator interface{ Validate() error }

// decodeDocument strictly decodes and validates one document. A Name left
// empty is taken from the file name; one that differs is an error.
func decodeDocument(kind Kind, name string, b []byte) (any, error) {
	t, err := kind.docType()
	if err != nil {
		return nil, err
	}
	v := reflect.New(t)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v.Interface()); err != nil {
		return nil, describeDecodeError(err, t)
	}
	if dec.More() {
		return nil, errors.New("malformed JSON: more than one value in the document")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("malformed JSON: trailing data after the document")
	}
	if err := checkExactKeys(b, t, ""); err != nil {
		return nil, err
	}
	doc := v.Interface()
	if n, ok := doc.(named); ok {
		p := n.docName()
		if *p == "" {
			*p = name
		} else if *p != name {
			return nil, fieldErr("name", "%q does not match the file name %q", *p, name+".json")
		}
	}
	if err := doc.(validator).Validate(); err != nil {
		return nil, err
	}
	return doc, nil
}

func describeDecodeError(err error, t reflect.Type) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		return fieldErr(typ.Field, "a JSON %s is not a valid %s", typ.Value, typ.Type)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("malformed JSON: empty or truncated document")
	}
	// encoding/json reports unknown fields only as text.
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fieldErr(strings.Trim(f, `"`), "unknown field; valid fields are %s", jsonFieldNames(t))
	}
	return fmt.Errorf("malformed JSON: %w", err)
}

// Put implements Store. doc may be a document value or a pointer to one.
func (s *DirStore) Put(kind Kind, name string, doc any) error {
	t, err := kind.docType()
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	v := reflect.ValueOf(doc)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return fmt.Errorf("put %s/%s: nil document", kind, name)
		}
		v = v.Elem()
	}
	if v.Type() != t {
		return fmt.Errorf("put %s/%s: a %s document is a datastore.%s, not %T", kind, name, kind, t.Name(), doc)
	}
	if kind.IsSingleton() {
		name = SingletonName
	}
	if err := checkDocumentName(name); err != nil {
		return fmt.Errorf("put %s: %w", kind, err)
	}
	cp := reflect.New(t)
	cp.Elem().Set(v)
	if n, ok := cp.Interface().(named); ok {
		p := n.docName()
		if *p == "" {
			*p = name
		} else if *p != name {
			return &DocumentError{Path: s.Path(kind, name), Err: fieldErr("name", "%q does not match the document name %q", *p, name)}
		}
	}
	if err := cp.Interface().(validator).Validate(); err != nil {
		return &DocumentError{Path: s.Path(kind, name), Err: err}
	}
	b, err := json.MarshalIndent(cp.Interface(), "", "  ")
	if err != nil {
		return fmt.Errorf("put %s/%s: encode: %w", kind, name, err)
	}
	return writeFileAtomic(s.Path(kind, name), append(b, '\n'))
}

func checkDocumentName(name string) error {
	if name == "" || strings.HasPrefix(name, ".") || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("document name %q: must be non-empty, not start with '.', and contain no '/'", name)
	}
	return nil
}

// writeFileAtomic writes path by writing a hidden temp file in the same
// directory and renaming it over path. Readers on this host see the old or
// the new content, never a mix. There is no fsync: the datastore lives for
// one run, and surviving a host crash is not worth ~3 ms per document.
func writeFileAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: close: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: rename: %w", path, err)
	}
	ok = true
	return nil
}

// WriteFileAtomic is the same temp-and-rename write for other files that
// readers poll, such as a programmer's status file.
func WriteFileAtomic(path string, b []byte) error { return writeFileAtomic(path, b) }

// Delete implements Store.
func (s *DirStore) Delete(kind Kind, name string) error {
	if _, err := kind.docType(); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	if err := checkDocumentName(name); err != nil && !kind.IsSingleton() {
		return fmt.Errorf("delete %s: %w", kind, err)
	}
	if err := os.Remove(s.Path(kind, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete %s/%s: %w", kind, name, err)
	}
	return nil
}

// Watch implements Store. It watches Dir and every kind subdirectory with
// inotify, coalesces bursts, and re-reads the directory every WatchResync in
// case an event was missed; either way the channel gets at most one pending
// signal. The channel is closed when ctx ends.
func (s *DirStore) Watch(ctx context.Context) (<-chan struct{}, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch datastore %s: %w", s.Dir, err)
	}
	if err := w.Add(s.Dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("watch datastore %s: %w", s.Dir, err)
	}
	for _, k := range Kinds {
		d := filepath.Join(s.Dir, string(k))
		if err := w.Add(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.Close()
			return nil, fmt.Errorf("watch datastore %s: %w", d, err)
		}
	}
	resync := s.WatchResync
	if resync <= 0 {
		resync = DefaultWatchResync
	}
	out := make(chan struct{}, 1)
	signal := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	last := s.fingerprint()
	go func() {
		defer close(out)
		defer w.Close()
		quiet := time.NewTimer(time.Hour)
		quiet.Stop()
		tick := time.NewTicker(resync)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if strings.HasPrefix(filepath.Base(ev.Name), ".") {
					continue // temp files; the rename that follows is the change
				}
				if ev.Has(fsnotify.Create) && filepath.Dir(ev.Name) == filepath.Clean(s.Dir) {
					if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
						_ = w.Add(ev.Name) // a kind dir made after we started
					}
				}
				quiet.Reset(watchQuiet)
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				// An overflow loses events: signal so the reader re-reads.
				s.log().Warn("datastore watch error; re-reading", "dir", s.Dir, "err", err)
				quiet.Reset(watchQuiet)
			case <-quiet.C:
				last = s.fingerprint()
				signal()
			case <-tick.C:
				if fp := s.fingerprint(); fp != last {
					last = fp
					signal()
				}
			}
		}
	}()
	return out, nil
}

// fingerprint summarises every document file's identity (name, size,
// modification time, inode) so the safety-net re-read can tell whether
// anything changed without decoding.
func (s *DirStore) fingerprint() uint64 {
	h := fnv.New64a()
	for _, k := range Kinds {
		dir := filepath.Join(s.Dir, string(k))
		ents, err := os.ReadDir(dir)
		if err != nil {
			fmt.Fprintf(h, "%s:err;", k)
			continue
		}
		names := make([]string, 0, len(ents))
		for _, e := range ents {
			if isDocumentFile(e.Name()) {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		for _, n := range names {
			fi, err := os.Stat(filepath.Join(dir, n))
			if err != nil {
				continue
			}
			fmt.Fprintf(h, "%s/%s:%d:%d:%v;", k, n, fi.Size(), fi.ModTime().UnixNano(), inode(fi))
		}
	}
	return h.Sum64()
}
