package e2e

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections to a backend and can be taken down and
// brought back on the same address, to play a git server that goes away.
type Proxy struct {
	Addr    string
	backend string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// NewProxy listens on 127.0.0.1 and forwards to backend (host:port).
func NewProxy(backend string) (*Proxy, error) {
	return NewProxyOn("127.0.0.1:0", backend)
}

// NewProxyOn listens on listen (host:port) and forwards to backend.
func NewProxyOn(listen, backend string) (*Proxy, error) {
	p := &Proxy{backend: backend, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p.Addr = ln.Addr().String()
	// Down closes the port for a while: no parallel loop may be given it.
	handedOut.Lock()
	handedOut.addrs[p.Addr] = true
	handedOut.Unlock()
	p.serve(ln)
	return p, nil
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *Proxy) forward(c net.Conn) {
	b, err := net.Dial("tcp", p.backend)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[b] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = b.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, b)
	p.mu.Unlock()
}

// Down stops listening and cuts every connection: clients get "connection
// refused", as from a stopped server.
func (p *Proxy) Down() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	p.wg.Wait()
}

// Up listens again on the same address.
func (p *Proxy) Up() error {
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		return fmt.Errorf("listen again on %s: %w", p.Addr, err)
	}
	p.serve(ln)
	return nil
}

// Close stops the proxy.
func (p *Proxy) Close() { p.Down() }
