package logic

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/danmaku/danmaku/internal/config"
)

// parseProxies parses logic.trusted_proxies: CIDRs, or single addresses
// (a /32 or /128).
func parseProxies(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for i, s := range list {
		s = strings.TrimSpace(s)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, config.Invalid(fmt.Sprintf("trusted_proxies[%d]", i), "%q is neither a CIDR nor an IP address", s)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// proxies is the parsed trusted_proxies list.
type proxies []netip.Prefix

func (ps proxies) trusted(a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientIP is the address a request is limited by. It is the peer's
// address, unless the peer is a trusted proxy: then X-Forwarded-For is read
// from the right (the entry the nearest proxy appended first) and the first
// address that is not itself a trusted proxy is the client. Entries left of
// it were written by the client and are never believed. "" when the peer
// address cannot be parsed (no address bucket then).
func (ps proxies) clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return ""
	}
	addr = addr.Unmap()
	if len(ps) == 0 || !ps.trusted(addr) {
		return addr.String()
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		parts := strings.Split(hops[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				// Garbage from the client side: the last good hop is
				// the best knowledge there is.
				return addr.String()
			}
			addr = a.Unmap()
			if !ps.trusted(addr) {
				return addr.String()
			}
		}
	}
	return addr.String()
}
