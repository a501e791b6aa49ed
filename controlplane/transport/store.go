package transport

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// StoreOptions configure the config bucket when the admin creates it.
type StoreOptions struct {
	History  int // revisions kept; default 5
	Replicas int // servers holding a copy; default 1 (README.md: "The config bucket")
}

// ConfigStore is the fleet's config in the ConfigBucket key-value bucket:
// one value, ConfigKey, whose revisions are the config's versions.
type ConfigStore struct {
	kv jetstream.KeyValue
}

// ErrNoConfig is returned by Latest and Revisions while the bucket holds no config yet.
var ErrNoConfig = errors.New("no config in the bucket")

// CreateConfigStore creates the config bucket, or updates its settings if
// it exists. It needs the admin role.
func (c *Conn) CreateConfigStore(ctx context.Context, opts StoreOptions) (*ConfigStore, error) {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return nil, fmt.Errorf("creating config bucket: %w", err)
	}
	if opts.History == 0 {
		opts.History = 5
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      ConfigBucket,
		Description: "steadydns fleet config",
		History:     uint8(min(opts.History, jetstream.KeyValueMaxHistory)),
		Replicas:    max(opts.Replicas, 1),
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("creating config bucket: %w", err)
	}
	return &ConfigStore{kv: kv}, nil
}

// OpenConfigStore opens the config bucket, which the admin has created.
func (c *Conn) OpenConfigStore(ctx context.Context) (*ConfigStore, error) {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return nil, fmt.Errorf("opening config bucket: %w", err)
	}
	kv, err := js.KeyValue(ctx, ConfigBucket)
	if err != nil {
		return nil, fmt.Errorf("opening config bucket: %w", err)
	}
	return &ConfigStore{kv: kv}, nil
}

// Put stores value as the config's new version and returns its revision.
// It needs the admin role.
func (s *ConfigStore) Put(ctx context.Context, value []byte) (uint64, error) {
	rev, err := s.kv.Put(ctx, ConfigKey, value)
	if err != nil {
		return 0, fmt.Errorf("putting config: %w", err)
	}
	return rev, nil
}

// Latest returns the config's newest version and its revision. It reads
// one message (a direct get), so it answers while a consumer could not be
// made, as when one of the bucket's servers has just died.
func (s *ConfigStore) Latest(ctx context.Context) ([]byte, uint64, error) {
	e, err := s.kv.Get(ctx, ConfigKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNoConfig
	}
	if err != nil {
		return nil, 0, fmt.Errorf("getting config: %w", err)
	}
	return e.Value(), e.Revision(), nil
}

// Revision returns the config's version stored as revision rev.
func (s *ConfigStore) Revision(ctx context.Context, rev uint64) ([]byte, error) {
	e, err := s.kv.GetRevision(ctx, ConfigKey, rev)
	if err != nil {
		return nil, fmt.Errorf("getting config revision %d: %w", rev, err)
	}
	return e.Value(), nil
}

// Revisions calls fn with each version the bucket still holds, newest
// first, until fn returns true. It returns ErrNoConfig while the bucket
// holds none. It reads one revision at a time by direct get: the history
// call of a key-value bucket would make a consumer and then delete it,
// which no host may do (Permissions).
func (s *ConfigStore) Revisions(ctx context.Context, fn func(value []byte, revision uint64) (done bool)) error {
	value, rev, err := s.Latest(ctx)
	if err != nil {
		return err
	}
	// The bucket holds one key, so its revisions are the stream's
	// sequence numbers, without gaps back to the oldest kept.
	for rev > 0 {
		if fn(value, rev) {
			return nil
		}
		rev--
		e, err := s.kv.GetRevision(ctx, ConfigKey, rev)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return nil
		case err != nil:
			return fmt.Errorf("getting config revision %d: %w", rev, err)
		case e.Operation() != jetstream.KeyValuePut:
			return nil
		}
		value = e.Value()
	}
	return nil
}

// Watch calls fn with the config's newest version, if there is one, and
// then with every new version, in order, on one goroutine, until ctx is
// done. It returns once the watch is set up.
func (s *ConfigStore) Watch(ctx context.Context, fn func(value []byte, revision uint64)) error {
	w, err := s.kv.Watch(ctx, ConfigKey)
	if err != nil {
		return fmt.Errorf("watching config: %w", err)
	}
	go func() {
		// Stopping a watcher deletes its consumer, which no host may do
		// (Permissions): the server removes it once the connection that
		// reads it closes.
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				// nil marks the end of the initial values.
				if e != nil && e.Operation() == jetstream.KeyValuePut {
					fn(e.Value(), e.Revision())
				}
			}
		}
	}()
	return nil
}
