// Package proto holds the generated protobuf and gRPC code of the driver
// plugin wire protocol (driver.proto). It is internal: the contract a
// vendor or an embedder relies on is package plugin (Serve, Host) and the
// operation table in driver/plugin/testdata/wire-contract.golden, never
// these generated types.
//
// The generated files are committed. After editing driver.proto,
// regenerate them from the module root with the pinned tools (protoc
// 3.21.12, protoc-gen-go v1.36.12, protoc-gen-go-grpc v1.6.2) on PATH:
//
//	PATH=$PATH:$(go env GOPATH)/bin go generate ./driver/plugin/internal/proto
//
// TestGeneratedCodeIsCurrent fails when the committed files differ from
// what those tools produce.
package proto

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative driver.proto
