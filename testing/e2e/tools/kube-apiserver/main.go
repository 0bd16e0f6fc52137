// Command kube-apiserver is the upstream Kubernetes API server, built from the
// k8s.io/kubernetes module so that ccmkit's e2e tests need neither Docker nor a
// download site. It is built and started by
// github.com/ccmkit/ccmkit/testing/e2e/controlplane; it is not meant to be run
// by hand.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
