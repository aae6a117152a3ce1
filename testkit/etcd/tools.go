//go:build tools

// Package tools pins the etcd server and etcdctl that the tests run: `make etcd` builds
// go.etcd.io/etcd/server/v3 and go.etcd.io/etcd/etcdctl/v3 at the versions this module's
// go.mod requires (checksums in go.sum), into the virtualenv as kubecoord-etcd and
// kubecoord-etcdctl.
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
