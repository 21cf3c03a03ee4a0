package ironicapi_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// TestLifecycleSimulatedAgent runs the lifecycle with the direct deploy
// interface and a simulated agent per node: the agent's lookups and
// heartbeats reach the same listener as the REST API (Options.Agent), so
// its API URL is the API server's, as ipa-api-url is with Ironic.
func TestLifecycleSimulatedAgent(t *testing.T) {
	ctx := context.Background()
	store := sqlstoretest.OpenSQLite(t, clock.System())
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindDeploy: {fake.Name, agentdeploy.Name},
			driver.KindPower:  {fake.Name, simfleet.PowerName},
		}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	// The listener exists before the conductor: the fleet needs its URL.
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(srv.Close)
	apiURL := "http://" + srv.Listener.Addr().String()
	fleet, err := simfleet.New(simfleet.Config{APIURL: apiURL, HeartbeatInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(client)); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindPower, simfleet.PowerName, fleet.Power(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "api-agent", Agent: conductor.AgentSettings{Client: client},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := agentclient.NewHandler(c.AgentBackend(), agentclient.HandlerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := ironicapi.New(ironicapi.Options{Conductor: c, Drivers: reg, Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Stop(sctx)
	})
	sc, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: srv.URL + "/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	sc.Microversion = "1.89"

	n, err := nodes.Create(ctx, sc, nodes.CreateOpts{Name: "agent-life", Driver: "fake-hardware",
		PowerInterface: simfleet.PowerName, DeployInterface: agentdeploy.Name,
	}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	// gophercloud's CreateOpts has no instance_info: Metal3 patches it in.
	if _, err := nodes.Update(ctx, sc, n.UUID, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_source", Value: "http://192.0.2.10/img.qcow2"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_checksum", Value: "0123456789abcdef0123456789abcdef"},
	}).Extract(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		opts nodes.ProvisionStateOpts
		want string
	}{
		{nodes.ProvisionStateOpts{Target: nodes.TargetManage}, "manageable"},
		{nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, "available"},
		{nodes.ProvisionStateOpts{Target: nodes.TargetActive, ConfigDrive: nodes.ConfigDrive{
			MetaData: map[string]any{"hostname": "agent-life"}, UserData: "#cloud-config\n"}}, "active"},
		{nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}, "available"},
	} {
		if err := nodes.ChangeProvisionState(ctx, sc, n.UUID, s.opts).ExtractErr(); err != nil {
			t.Fatalf("%s: %v", s.opts.Target, err)
		}
		waitState(t, sc, n.UUID, s.want)
	}
	if fleet.Boots(n.UUID) < 2 {
		t.Fatalf("the agent booted %d times: cleaning and deploying each boot it", fleet.Boots(n.UUID))
	}
	if err := nodes.Delete(ctx, sc, n.UUID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
}
