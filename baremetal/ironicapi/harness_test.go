package ironicapi_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
)

// lab is one API server on a started conductor with fake-hardware on a
// fresh SQLite store.
type lab struct {
	srv  *httptest.Server
	c    *conductor.Conductor
	reg  *driver.Registry
	api  *ironicapi.Handler
	opts ironicapi.Options
}

// labOption adjusts the conductor or handler options before start.
type labOption func(*conductor.Options, *ironicapi.Options)

func newLab(t *testing.T, opts ...labOption) *lab {
	t.Helper()
	return newLabWith(t, driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}}, opts...)
}

// newLabWith is newLab with the driver registry configured by cfg.
func newLabWith(t *testing.T, cfg driver.Config, opts ...labOption) *lab {
	t.Helper()
	store := sqlstoretest.OpenSQLite(t, clock.System())
	reg := driver.NewRegistry(cfg)
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	co := conductor.Options{Hostname: "api-test"}
	ao := ironicapi.Options{}
	for _, o := range opts {
		o(&co, &ao)
	}
	c, err := conductor.New(store, reg, co)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	ao.Conductor, ao.Drivers = c, reg
	h, err := ironicapi.New(ao)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &lab{srv: srv, c: c, reg: reg, api: h, opts: ao}
}

// client is a gophercloud noauth client at microversion v ("" for none).
func (l *lab) client(t *testing.T, v string) *gophercloud.ServiceClient {
	t.Helper()
	sc, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: l.srv.URL + "/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	sc.Microversion = v
	return sc
}
