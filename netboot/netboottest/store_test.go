package netboottest_test

import (
	"context"
	"slices"
	"testing"

	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/netboot/netboottest"
)

func TestStoreKeepsLogsAndRefusesAnotherNodesMAC(t *testing.T) {
	ctx := context.Background()
	s := netboottest.NewStore()
	mac := "52:54:00:12:34:56"
	if err := s.PutConfig(ctx, netboot.Config{Node: "a", MACs: []string{mac}, Action: netboot.Ramdisk, Purpose: "clean"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutConfig(ctx, netboot.Config{Node: "b", MACs: []string{mac}, Action: netboot.Ramdisk}); err == nil {
		t.Fatal("a second node took node a's MAC")
	}
	if _, ok := s.Config("b"); ok {
		t.Fatal("the refused configuration was kept")
	}
	if c, ok := s.ForMAC(mac); !ok || c.Node != "a" {
		t.Fatalf("ForMAC = %+v, %v", c, ok)
	}
	if err := s.PutConfig(ctx, netboot.Config{Node: "a", MACs: []string{mac}, Action: netboot.LocalDisk}); err != nil {
		t.Fatal(err)
	}
	_ = s.DeleteConfig(ctx, "a")
	_ = s.DeleteConfig(ctx, "a") // nothing left: not logged
	if got, want := s.Writes("a"), []string{"put ramdisk/clean", "put local", "delete"}; !slices.Equal(got, want) {
		t.Fatalf("Writes = %q, want %q", got, want)
	}
}
