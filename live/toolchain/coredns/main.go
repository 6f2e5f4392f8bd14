// CoreDNS for the live tier's real nodes (live/realnodes.py): the release's own server with only the plugins the
// tier's Corefile uses, so that the build leaves out the clouds' SDKs the default plugin set links.
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
