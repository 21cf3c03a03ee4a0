package dhcp

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

func TestOptionsValidation(t *testing.T) {
	a := netip.MustParseAddr
	cases := []struct {
		field string
		edit  func(*Options)
	}{
		{"Mode", func(o *Options) { o.Mode = "" }},
		{"Mode", func(o *Options) { o.Mode = "relay" }},
		{"ServerIP", func(o *Options) { o.ServerIP = netip.Addr{} }},
		{"ServerIP", func(o *Options) { o.ServerIP = a("2001:db8::1") }},
		{"Interface", func(o *Options) { o.Interface = "a-very-long-interface-name" }},
		{"Decider", func(o *Options) { o.Decider = nil }},
		{"LeaseTime", func(o *Options) { o.LeaseTime = time.Second }},
		{"OfferHold", func(o *Options) { o.OfferHold = time.Millisecond }},
		{"MaxPacketSize", func(o *Options) { o.MaxPacketSize = 300 }},
		{"Workers", func(o *Options) { o.Workers = 1000 }},
		{"Subnet", func(o *Options) { o.Subnet = netip.Prefix{} }},
		{"Subnet", func(o *Options) { o.Subnet = netip.MustParsePrefix("192.0.2.0/31") }},
		{"PoolStart", func(o *Options) { o.PoolStart = a("198.51.100.1") }},
		{"PoolStart", func(o *Options) { o.PoolStart = a("192.0.2.0") }},
		{"PoolEnd", func(o *Options) { o.PoolEnd = a("192.0.2.255") }},
		{"PoolEnd", func(o *Options) { o.PoolStart, o.PoolEnd = a("192.0.2.103"), a("192.0.2.100") }},
		{"PoolEnd", func(o *Options) {
			o.Subnet, o.PoolStart, o.PoolEnd = netip.MustParsePrefix("10.0.0.0/8"), a("10.0.0.2"), a("10.2.0.0")
			o.ServerIP = a("10.0.0.1")
		}},
		{"PoolStart", func(o *Options) { o.PoolStart = a("192.0.2.1") }},
		{"Router", func(o *Options) { o.Router = a("198.51.100.1") }},
		{"DNS[1]", func(o *Options) { o.DNS = []netip.Addr{a("192.0.2.53"), a("0.0.0.0")} }},
		{"MaxLeases", func(o *Options) { o.MaxLeases = -1 }},
	}
	for _, tc := range cases {
		o := Options{Mode: Authoritative, ServerIP: serverIP, Subnet: subnet,
			PoolStart: a("192.0.2.100"), PoolEnd: a("192.0.2.199"), Decider: DeciderFunc(testDecider)}
		tc.edit(&o)
		_, err := New(o)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("want a ConfigError on %s, got %v", tc.field, err)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	s, err := New(Options{Mode: Proxy, ServerIP: serverIP, Decider: DeciderFunc(testDecider)})
	if err != nil {
		t.Fatalf("proxy mode needs no pool: %v", err)
	}
	o := s.opts
	if o.LeaseTime != DefaultLeaseTime || o.OfferHold != DefaultOfferHold || o.DeclineHold != DefaultDeclineHold ||
		o.MaxPacketSize != DefaultMaxPacketSize || o.Workers != DefaultWorkers || o.Logger == nil || o.Clock == nil {
		t.Errorf("defaults not filled in: %+v", o)
	}
	if s.Leases() != nil {
		t.Errorf("proxy mode has leases")
	}
	s, err = New(Options{Mode: Authoritative, ServerIP: serverIP, Subnet: netip.MustParsePrefix("192.0.2.7/24"),
		PoolStart: netip.MustParseAddr("192.0.2.100"), PoolEnd: netip.MustParseAddr("192.0.2.199"), Decider: DeciderFunc(testDecider)})
	if err != nil {
		t.Fatal(err)
	}
	if s.opts.Subnet.String() != "192.0.2.0/24" || s.opts.MaxLeases != DefaultMaxLeases {
		t.Errorf("Subnet %v MaxLeases %d, want 192.0.2.0/24 and %d", s.opts.Subnet, s.opts.MaxLeases, DefaultMaxLeases)
	}
}
