package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The loop's cluster DNS, on the real node when a loop asks for it
// (StackOptions.ArgoWorkflows): the kubelet gives pods the bridge's
// gateway as their nameserver and cluster.local as their domain, and this
// server answers there what a cluster's DNS answers for Services, read
// from the API server at each query: <svc>.<ns>.svc.cluster.local is the
// Service's ClusterIP (A; AAAA has no answer), any other name is
// NXDOMAIN. The catalog's workflows name Services that way
// (http://demo-http-<experiment>-<hash>.demo.svc.cluster.local); kube-proxy then carries the
// request to a pod. Headless Services, pods' and SRV records are not
// served (nothing in the loop asks for them).

// clusterDomain is the pods' DNS domain.
const clusterDomain = "cluster.local"

// clusterDNS is the loop's DNS server.
type clusterDNS struct {
	conn *net.UDPConn
	c    client.Reader
	logf func(string, ...any)
	done chan struct{}
}

// startClusterDNS serves on addr (host:53) until Close.
func startClusterDNS(addr string, c client.Reader, logf func(string, ...any)) (*clusterDNS, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("cluster DNS on %s: %w", addr, err)
	}
	d := &clusterDNS{conn: conn, c: c, logf: logf, done: make(chan struct{})}
	go d.serve()
	return d, nil
}

// Close stops the server.
func (d *clusterDNS) Close() {
	_ = d.conn.Close()
	<-d.done
}

func (d *clusterDNS) serve() {
	defer close(d.done)
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		query := append([]byte(nil), buf[:n]...)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if reply, err := d.answer(ctx, query); err == nil {
				_, _ = d.conn.WriteToUDP(reply, from)
			}
		}()
	}
}

// answer builds the reply to one query.
func (d *clusterDNS) answer(ctx context.Context, query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired}
	ip, rcode := d.resolve(ctx, q)
	rh.RCode = rcode
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if ip != nil && q.Type == dnsmessage.TypeA {
		var a [4]byte
		copy(a[:], ip.To4())
		if err := b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5}, dnsmessage.AResource{A: a}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// resolve looks a question's name up as a Service: its ClusterIP, or the
// response code saying why there is none.
func (d *clusterDNS) resolve(ctx context.Context, q dnsmessage.Question) (net.IP, dnsmessage.RCode) {
	svc, ns, ok := serviceName(q.Name.String())
	if !ok {
		return nil, dnsmessage.RCodeNameError
	}
	s := &corev1.Service{}
	if err := d.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: svc}, s); err != nil {
		return nil, dnsmessage.RCodeNameError
	}
	ip := net.ParseIP(s.Spec.ClusterIP).To4()
	if ip == nil {
		return nil, dnsmessage.RCodeNameError
	}
	return ip, dnsmessage.RCodeSuccess
}

// serviceName splits "<svc>.<ns>.svc.cluster.local." into the Service's
// name and namespace.
func serviceName(fqdn string) (svc, ns string, ok bool) {
	rest, found := strings.CutSuffix(strings.ToLower(fqdn), ".svc."+clusterDomain+".")
	if !found {
		return "", "", false
	}
	svc, ns, found = strings.Cut(rest, ".")
	if !found || svc == "" || ns == "" || strings.Contains(ns, ".") {
		return "", "", false
	}
	return svc, ns, true
}
