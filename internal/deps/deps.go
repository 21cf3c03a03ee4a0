//go:build tools

// Package deps pins the project's third-party dependencies while the
// packages that use them are being written, so that parallel work on
// separate packages shares one go.mod. It is never built.
package deps

import (
	_ "github.com/bmc-toolbox/bmclib/v2"
	_ "github.com/diskfs/go-diskfs"
	_ "github.com/google/uuid"
	_ "github.com/hashicorp/go-hclog"
	_ "github.com/hashicorp/go-plugin"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/jmoiron/sqlx"
	_ "github.com/pressly/goose/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/stmcginnis/gofish"
	_ "go.uber.org/goleak"
	_ "go.uber.org/mock/gomock"
	_ "golang.org/x/sync/errgroup"
	_ "google.golang.org/grpc"
	_ "google.golang.org/protobuf/proto"
	_ "modernc.org/sqlite"
)
