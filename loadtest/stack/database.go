package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net/url"

	"github.com/jackc/pgx/v5"
)

// FreshDatabase creates a database named prefix_<random> on serverURL's
// server and returns its URL and a func that drops it. A run's rows are its
// own: two runs on one server never see each other's events.
func FreshDatabase(ctx context.Context, serverURL, prefix string) (dbURL string, drop func(context.Context) error, err error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", nil, fmt.Errorf("database URL: %w", err)
	}
	name := prefix + "_" + randomHex(6)
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect to %s: %w", u.Host, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	drop = func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, serverURL)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		return err
	}
	return u.String(), drop, nil
}

// SpreadEventIDs starts the database's event ids at a random point between
// one million and 2^40: Redis keys are per event id, so runs sharing one Redis
// database (the tests) never share a waiting room. Call it once the core has
// migrated the database (after Start).
func SpreadEventIDs(ctx context.Context, dbURL string) error {
	n, err := rand.Int(rand.Reader, big.NewInt(1<<40))
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SELECT setval('events_id_seq', $1)`, 1_000_000+n.Int64())
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}
