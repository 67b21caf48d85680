package main

import (
	"flag"
	"os"

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

// redact hides the password of a store URL before it is printed.
func redact(s string) string { return storeopen.Redact(s) }

// readDBFlags are serve's --db-read and --db-read-password-file: a
// streaming standby of the --db server that the compliance reads go to,
// named as --db is (the URL from ACSLEDGER_DB_READ_URL instead of the
// command line, the password from a file).
type readDBFlags struct {
	db, passwordFile string
}

func (d *readDBFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.db, "db-read", "", "read replica: a streaming standby of the --db PostgreSQL server, for searches, session reads, exports and re-verification (docs/operations.md); default $"+storeopen.EnvReadURL+" when set")
	fs.StringVar(&d.passwordFile, "db-read-password-file", "", "read the read replica's PostgreSQL password from FILE (its first line) instead of the URL")
}

// url is the read replica's URL with the password file's password in it,
// or "" when none is named.
func (d *readDBFlags) url() (string, error) { return storeopen.ResolveRead(d.db, d.passwordFile) }
