package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/jackc/pgx/v5"
)

// Notifier is the baremetal.ClusterNotifier of conductors sharing a
// PostgreSQL database: Publish is pg_notify, and a dedicated connection
// LISTENs on every topic and fans the payloads out to this process's
// subscribers. Channel names carry the connection's schema
// ("anvil_<schema>_<topic>"), so fleets in different schemas of one
// database do not hear each other.
//
// The listening connection is re-established with backoff when it drops;
// after a reconnect every membership subscriber is told once, since
// notifications sent meanwhile were lost. Conductors sharing SQLite live
// in one process and use baremetal.NewLocalNotifier instead.
//
// Create it with NewNotifier and stop it with Close.
type Notifier struct {
	dsn    string
	log    *slog.Logger
	local  *baremetal.LocalNotifier
	prefix string

	pubMu sync.Mutex
	pub   *pgx.Conn

	cancel context.CancelFunc
	done   chan struct{}
}

// notifyTopics are the topics the listener subscribes to.
var notifyTopics = []string{baremetal.TopicMembership, baremetal.TopicIntent, baremetal.TopicTakeover}

// NewNotifier connects to the PostgreSQL database of dsn (the same DSN the
// store was opened with, so the same schema) and starts listening. log
// receives connection problems; nil means slog.Default(), as everywhere an
// embedder configures logging.
func NewNotifier(ctx context.Context, dsn string, log *slog.Logger) (*Notifier, error) {
	if log == nil {
		log = slog.Default()
	}
	pub, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: notifier: connecting: %w", err)
	}
	var schema string
	if err := pub.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		_ = pub.Close(ctx)
		return nil, fmt.Errorf("sqlstore: notifier: reading the schema: %w", err)
	}
	listen, err := connectListener(ctx, dsn, "anvil_"+schema+"_")
	if err != nil {
		_ = pub.Close(ctx)
		return nil, err
	}
	bg, cancel := context.WithCancel(context.Background())
	n := &Notifier{dsn: dsn, log: log.With("component", "sqlstore/notifier"), local: baremetal.NewLocalNotifier(),
		prefix: "anvil_" + schema + "_", pub: pub, cancel: cancel, done: make(chan struct{})}
	go n.run(bg, listen)
	return n, nil
}

func connectListener(ctx context.Context, dsn, prefix string) (*pgx.Conn, error) {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: notifier: connecting the listener: %w", err)
	}
	for _, t := range notifyTopics {
		if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{prefix + t}.Sanitize()); err != nil {
			_ = c.Close(ctx)
			return nil, fmt.Errorf("sqlstore: notifier: LISTEN %s: %w", t, err)
		}
	}
	return c, nil
}

// listenRetryMax caps the pause between the listener's reconnection
// attempts, and so bounds how long after the database's return it
// listens again.
const listenRetryMax = time.Second

// run receives notifications until ctx ends, reconnecting as needed.
func (n *Notifier) run(ctx context.Context, c *pgx.Conn) {
	defer close(n.done)
	backoff := 100 * time.Millisecond
	for {
		for c != nil {
			msg, err := c.WaitForNotification(ctx)
			if err != nil {
				closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = c.Close(closeCtx)
				cancel()
				c = nil
				if ctx.Err() != nil {
					return
				}
				n.log.Warn("listener connection lost", "error", err)
				break
			}
			backoff = 100 * time.Millisecond
			if topic, ok := strings.CutPrefix(msg.Channel, n.prefix); ok {
				_ = n.local.Publish(ctx, topic, msg.Payload)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, listenRetryMax)
		var err error
		c, err = connectListener(ctx, n.dsn, n.prefix)
		if err != nil {
			n.log.Warn("listener reconnect failed", "error", err)
			continue
		}
		// Notifications sent while disconnected are lost: have every
		// conductor of this process rebuild its rings.
		_ = n.local.Publish(ctx, baremetal.TopicMembership, "")
	}
}

// Publish implements baremetal.ClusterNotifier with pg_notify; every
// listener of the schema, this process's included, receives it. A
// publishing connection that broke (the database restarted, the network
// dropped it) is noticed only when used: the notification is then sent
// again once on a new connection, so the first one after an outage (a
// conductor's shutdown notice, say) is not lost.
func (n *Notifier) Publish(ctx context.Context, topic, payload string) error {
	n.pubMu.Lock()
	defer n.pubMu.Unlock()
	var err error
	for attempt := 1; attempt <= 2; attempt++ {
		if n.pub == nil || n.pub.IsClosed() {
			c, cerr := pgx.Connect(ctx, n.dsn)
			if cerr != nil {
				return fmt.Errorf("sqlstore: notifier: reconnecting: %w", cerr)
			}
			n.pub = c
		}
		_, err = n.pub.Exec(ctx, "SELECT pg_notify($1, $2)", n.prefix+topic, payload)
		if err == nil {
			return nil
		}
		broken := n.pub.IsClosed() || baremetal.IsStoreUnavailable(err)
		if broken || errors.Is(err, context.DeadlineExceeded) {
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = n.pub.Close(closeCtx)
			cancel()
			n.pub = nil
		}
		if !broken || ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("sqlstore: notifier: publishing on %s: %w", topic, err)
}

// Subscribe implements baremetal.ClusterNotifier.
func (n *Notifier) Subscribe(topic string) (<-chan string, func()) {
	return n.local.Subscribe(topic)
}

// Close stops listening and closes both connections.
func (n *Notifier) Close() error {
	n.cancel()
	<-n.done
	n.pubMu.Lock()
	defer n.pubMu.Unlock()
	if n.pub != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := n.pub.Close(ctx)
		n.pub = nil
		return err
	}
	return nil
}

var _ baremetal.ClusterNotifier = (*Notifier)(nil)
