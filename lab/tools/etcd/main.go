// Command etcd is etcd's own server, built from the module proxy so the
// Kubernetes test suite does not depend on a distribution package.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
