// Package datastore holds the cluster state both route programmers read — IP
// pools, nodes, block affinities, workloads, BGP peers, FelixConfiguration and
// BGPConfiguration — as in the real system where Felix and confd watch one
// datastore. A single change therefore reaches both at the same time.
//
// The embedded backend is DirStore: a directory of JSON documents, one file
// per document at <dir>/<kind>/<name>.json (singletons at
// <dir>/<kind>/default.json), written atomically (a hidden temp file in the
// same directory, then rename) and watched with inotify on the directory and
// every kind subdirectory, plus a periodic re-read as a safety net. A lab
// backend (etcd, Kubernetes CRDs) can replace it behind Store.
//
// Read is strict: malformed JSON, a field that is unknown (or matches only
// case-insensitively), a bad CIDR or enum, overlapping pools or a block
// affine to two nodes fail the whole read, with an error naming the file, the
// field and what would be valid. One thing is deliberately not an error: an
// unknown programClusterRoutes value. Both components must treat it exactly
// like an unset field (internal/calico/config.Resolve), so the datastore passes it
// through.
//
// It must not import harness/ or anything that knows about scenarios.
package datastore

import "context"

// Store is the datastore both programmers and the harness use.
type Store interface {
	// Read returns one consistent, validated view of every document. An
	// invalid document fails the whole read with an error naming the
	// document and the field, so no reader acts on half-valid state.
	Read(ctx context.Context) (*Cluster, error)
	// Put validates and writes one document atomically. doc is one of the
	// document types in this package; name is ignored for singletons.
	Put(kind Kind, name string, doc any) error
	// Delete removes one document; a missing document is not an error.
	Delete(kind Kind, name string) error
	// Watch signals (coalesced) after any document changes, until ctx ends.
	Watch(ctx context.Context) (<-chan struct{}, error)
}
