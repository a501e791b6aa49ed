package transport

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// EventsSubject is where aggregator sender of cell publishes each change
// of a check's state it judges: "steadydns.events.<cell>.<id>", one JSON
// message per change. Events are not a Kind: they are not chunked, so an
// operator's own NATS tools read them as they are.
func EventsSubject(cell, sender string) string {
	return SubjectPrefix + ".events." + cell + "." + sender
}

// PublishEvent sends one event's JSON on this host's events subject. It
// fails while the connection is down.
func (c *Conn) PublishEvent(payload []byte) error {
	if !c.nc.IsConnected() {
		return fmt.Errorf("publishing an event: %w", ErrNotConnected)
	}
	if err := c.nc.Publish(c.events, payload); err != nil {
		return fmt.Errorf("publishing an event: %w", err)
	}
	return nil
}

// EventSubscription receives events.
type EventSubscription struct{ sub *nats.Subscription }

// SubscribeEvents receives the events of cell (AllCells: of every cell):
// fn gets each with the cell and sender its subject names, on one
// goroutine, one at a time.
func (c *Conn) SubscribeEvents(cell string, fn func(cell, sender string, payload []byte)) (*EventSubscription, error) {
	if cell != AllCells {
		if err := ValidCell(cell); err != nil {
			return nil, fmt.Errorf("subscribing to events: %w", err)
		}
	}
	subject := EventsSubject(cell, "*")
	sub, err := c.nc.Subscribe(subject, func(m *nats.Msg) {
		tokens := strings.Split(m.Subject, ".")
		if len(tokens) == 4 {
			fn(tokens[2], tokens[3], m.Data)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	return &EventSubscription{sub}, nil
}

// Unsubscribe stops the subscription.
func (s *EventSubscription) Unsubscribe() error {
	if err := s.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("unsubscribing from %s: %w", s.sub.Subject, err)
	}
	return nil
}
