// Package proto holds the generated protobuf and gRPC code of the driver
// plugin wire protocol (driver.proto). Regenerate with go generate; the
// generated files are committed.
package proto

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative driver.proto
