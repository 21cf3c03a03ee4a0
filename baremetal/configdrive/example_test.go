package configdrive_test

import (
	"context"
	"fmt"

	"github.com/anvilmetal/anvil/baremetal/configdrive"
)

func ExampleBuild() {
	v, err := configdrive.Parse([]byte(`{"meta_data":{"hostname":"web-1"},"user_data":"#cloud-config\n"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	encoded, err := configdrive.Build(context.Background(), configdrive.Node{UUID: "4f0c9b1e-0000-4000-8000-000000000001"}, *v.Contents)
	if err != nil {
		fmt.Println(err)
		return
	}
	img, _ := configdrive.Decode(encoded)
	label, files, _ := configdrive.ReadFiles(img)
	fmt.Println(label, string(files["meta_data.json"]))
	// Output: config-2 {"hostname":"web-1","uuid":"4f0c9b1e-0000-4000-8000-000000000001"}
}
