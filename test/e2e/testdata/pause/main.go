// Command pause is the real node's sandbox image: it holds a pod's
// namespaces and exits on SIGTERM or SIGINT, as Kubernetes' pause does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
