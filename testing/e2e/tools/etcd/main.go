// Command etcd is the upstream etcd server, built from the go.etcd.io/etcd
// module so that ccmkit's e2e tests need neither Docker nor a download site.
// It is built and started by github.com/ccmkit/ccmkit/testing/e2e/controlplane;
// it is not meant to be run by hand.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
