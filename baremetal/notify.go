package baremetal

// The cluster notifier is part of the contract between a Store and the
// conductor engine: a store whose database can carry notifications (such
// as PostgreSQL's LISTEN/NOTIFY in sqlstore) offers a ClusterNotifier, and
// every conductor sharing the database uses it to learn of membership
// changes and hand-offs at once.

import (
	"context"
	"sync"
)

// Topics of the cluster notifier.
const (
	// TopicMembership is published when a conductor joins, drains or
	// leaves; every conductor rebuilds its rings at once.
	TopicMembership = "membership"
	// TopicIntent is published with a node UUID when a conductor accepted
	// a verb for a node it does not own, so the owner picks it up at once
	// instead of at its next intent poll.
	TopicIntent = "intent"
	// TopicTakeover is published with its hostname by a conductor that
	// released dead conductors' reservations, so that the nodes' owners
	// take the interrupted ones over at once instead of at their next
	// orphan check.
	TopicTakeover = "takeover"
)

// ClusterNotifier carries small notifications between the conductors that
// share a database: PostgreSQL's LISTEN/NOTIFY (sqlstore.NewNotifier), or
// a LocalNotifier between conductors of one process (SQLite). A missed
// notification is never fatal: rings are rebuilt on a timer and intents
// are polled, notifications only make both immediate.
type ClusterNotifier interface {
	// Publish sends payload on topic to every subscriber of every process,
	// this one included. It does not wait for delivery.
	Publish(ctx context.Context, topic, payload string) error
	// Subscribe returns a channel receiving the payloads published on
	// topic from now on, and a function that ends the subscription.
	// Deliveries to a slow subscriber may be dropped.
	Subscribe(topic string) (<-chan string, func())
}

// LocalNotifier is a ClusterNotifier between conductors of one process,
// for SQLite (where all conductors share one process) and tests. It is
// safe for concurrent use; the zero value is not usable, call
// NewLocalNotifier.
type LocalNotifier struct {
	mu   sync.Mutex
	subs map[string]map[int]chan string
	next int
}

// NewLocalNotifier returns an empty in-process notifier.
func NewLocalNotifier() *LocalNotifier {
	return &LocalNotifier{subs: map[string]map[int]chan string{}}
}

// Publish delivers payload to every current subscriber of topic, dropping
// it for a subscriber whose buffer is full.
func (l *LocalNotifier) Publish(_ context.Context, topic, payload string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ch := range l.subs[topic] {
		select {
		case ch <- payload:
		default:
		}
	}
	return nil
}

// Subscribe implements ClusterNotifier.
func (l *LocalNotifier) Subscribe(topic string) (<-chan string, func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan string, 256)
	if l.subs[topic] == nil {
		l.subs[topic] = map[int]chan string{}
	}
	id := l.next
	l.next++
	l.subs[topic][id] = ch
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.subs[topic], id)
			l.mu.Unlock()
		})
	}
}

var _ ClusterNotifier = (*LocalNotifier)(nil)
