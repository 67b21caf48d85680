package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/acsledger/acsledger/internal/keydir"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// dbFlags are --db and --db-password-file, for every command that opens
// a store. A password never needs the command line: the URL may come from
// ACSLEDGER_DB_URL instead of --db, and the password from a file.
type dbFlags struct {
	db, passwordFile string
}

func (d *dbFlags) register(fs *flag.FlagSet, usage string) {
	fs.StringVar(&d.db, "db", "", usage+"; default $"+storeopen.EnvURL+" when set. postgres://..., postgresql://... or host=... dbname=... is PostgreSQL")
	fs.StringVar(&d.passwordFile, "db-password-file", "", "read the PostgreSQL password from FILE (its first line) instead of the URL")
}

// named is the store URL named by flag or environment, without the
// password file's password: "" when none is.
func (d *dbFlags) named() string {
	if d.db != "" {
		return d.db
	}
	return os.Getenv(storeopen.EnvURL)
}

// url is the store URL the command opens, with the password file's
// password in it; the embedded store's default directory when none is
// named.
func (d *dbFlags) url() (string, error) {
	u, err := storeopen.Resolve(d.db, d.passwordFile)
	if err != nil {
		return "", err
	}
	return storeURL(u), nil
}

// keysDir is the key directory given with --keys, or the default one
// beside the store named.
func (d *dbFlags) keysDir(given string) string {
	if given != "" {
		return given
	}
	return defaultKeysDir(storeURL(d.named()))
}

// paramsDBFlags are the store flags with --keys and --master-key-file, for
// the commands that read request params at rest (replay, whatif).
type paramsDBFlags struct {
	db              dbFlags
	keys, masterKey string
}

// register registers the flags; keysUsage says what --keys is for.
func (f *paramsDBFlags) register(fs *flag.FlagSet, keysUsage string) {
	f.db.register(fs, "store URL (default: embedded store in ./"+storeopen.DefaultDir+")")
	fs.StringVar(&f.keys, "keys", "", keysUsage)
	fs.StringVar(&f.masterKey, "master-key-file", "", "FILE holding the master key of request params at rest (default $"+keydir.EnvMasterKey+", else "+keydir.MasterKeyFile+" in --keys)")
}

// open opens the store with the master key the flags name.
func (f *paramsDBFlags) open(ctx context.Context) (storeopen.Store, error) {
	return openSealedStore(ctx, f.db, f.masterKey, f.db.keysDir(f.keys))
}

// redact hides the password of a store URL before it is printed.
func redact(s string) string { return storeopen.Redact(s) }

// readDBFlags are serve's --db-read and --db-read-password-file: a
// streaming standby of the --db server that the compliance reads go to,
// named as --db is (the URL from ACSLEDGER_DB_READ_URL instead of the
// command line, the password from a file).
type readDBFlags struct {
	db, passwordFile string
	maxLag           time.Duration
	fs               *flag.FlagSet
}

// envReadMaxLag is where --db-read-max-lag comes from when not given.
const envReadMaxLag = "ACSLEDGER_DB_READ_MAX_LAG"

// defaultReadMaxLag is --db-read-max-lag's default: a replica staler
// than this is not what a compliance officer expects to read, and the
// primary, which serves every write anyway, can take the reads for the
// while. It is 30 lag measurements, so a replica that falls behind for a
// moment (a checkpoint, a burst of writes) keeps its reads.
const defaultReadMaxLag = 30 * time.Second

func (d *readDBFlags) register(fs *flag.FlagSet) {
	d.fs = fs
	fs.StringVar(&d.db, "db-read", "", "read replica: a streaming standby of the --db PostgreSQL server, for searches, session reads, exports and re-verification (docs/operations.md); default $"+storeopen.EnvReadURL+" when set")
	fs.StringVar(&d.passwordFile, "db-read-password-file", "", "read the read replica's PostgreSQL password from FILE (its first line) instead of the URL")
	fs.DurationVar(&d.maxLag, "db-read-max-lag", defaultReadMaxLag, "while the read replica has been missing the primary's WAL for longer than this, compliance reads go to the primary (0: no limit); default $"+envReadMaxLag+" when set")
}

// limit is --db-read-max-lag, or $ACSLEDGER_DB_READ_MAX_LAG when the flag
// is not given. A negative or malformed value, and the flag given without
// a read replica (readURL ""), are usage errors.
func (d *readDBFlags) limit(readURL string, getenv func(string) string) (time.Duration, error) {
	given := false
	d.fs.Visit(func(f *flag.Flag) { given = given || f.Name == "db-read-max-lag" })
	name := "--db-read-max-lag"
	switch v := getenv(envReadMaxLag); {
	case given && readURL == "":
		return 0, fmt.Errorf("%w: --db-read-max-lag without a read replica (--db-read or $%s)", errUsage, storeopen.EnvReadURL)
	case !given && v != "":
		name = "$" + envReadMaxLag
		lag, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("%w: %s %q: not a duration (30s, 2m, 0 for no limit)", errUsage, name, v)
		}
		d.maxLag = lag
	}
	if d.maxLag < 0 {
		return 0, fmt.Errorf("%w: %s %v: must be 0 (no limit) or positive", errUsage, name, d.maxLag)
	}
	return d.maxLag, nil
}

// url is the read replica's URL with the password file's password in it,
// or "" when none is named.
func (d *readDBFlags) url() (string, error) { return storeopen.ResolveRead(d.db, d.passwordFile) }
