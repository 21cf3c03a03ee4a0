package vmlab

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestLabClose checks that Close runs the clean-ups last first, once,
// and joins their errors.
func TestLabClose(t *testing.T) {
	lab := &Lab{}
	var order []int
	for i := range 3 {
		lab.cleanup(func() error {
			order = append(order, i)
			if i == 1 {
				return errors.New("boom")
			}
			return nil
		})
	}
	if err := lab.Close(); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Close = %v", err)
	}
	if err := lab.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if !slices.Equal(order, []int{2, 1, 0}) {
		t.Errorf("clean-ups ran %v", order)
	}
}

// TestConfigDrive checks the config drive the OS image's marker reads.
func TestConfigDrive(t *testing.T) {
	b, err := ConfigDrive("x-1")
	if err != nil {
		t.Fatal(err)
	}
	var cd struct {
		MetaData map[string]string `json:"meta_data"`
		UserData string            `json:"user_data"`
	}
	if err := json.Unmarshal(b, &cd); err != nil {
		t.Fatal(err)
	}
	if cd.MetaData["hostname"] != LabHostname || !strings.Contains(cd.UserData, "anvil-marker: x-1\n") {
		t.Errorf("config drive %s", b)
	}
	info := (&Lab{}).RawInstanceInfo("abc")
	if info["image_source"] != "http://192.0.2.1:8081/disk.raw" || info["image_os_hash_value"] != "abc" {
		t.Errorf("instance_info %v", info)
	}
}
