package storeopen

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
)

// EnvURL names the environment variable a command takes the store URL
// from when --db is not given, so that a URL holding a password need not
// be on a command line (where ps and shell history show it).
const EnvURL = "ACSLEDGER_DB_URL"

// EnvReadURL names the environment variable acsledger serve takes its
// read replica's URL from when --db-read is not given.
const EnvReadURL = "ACSLEDGER_DB_READ_URL"

// dsnKeyword is how a PostgreSQL key=value connection string starts: a
// keyword (host, dbname, user, ...) and '='. A directory path that starts
// so must be written sqlite:DIR or ./DIR.
var dsnKeyword = regexp.MustCompile(`^\s*[a-z_]+\s*=`)

// isDSN reports whether s is a PostgreSQL key=value connection string.
func isDSN(s string) bool { return dsnKeyword.MatchString(s) }

// isPostgresURL reports whether s is a PostgreSQL URL.
func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// The password in a URL's user info (up to the last '@' before the host),
// and the value of a key=value string's password keyword, quoted or not.
var (
	urlPassword = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*:(?://)?[^:@/]*:)(.*)@([^@]*)$`)
	dsnPassword = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)`)
)

// Redact returns a store URL fit to print: the password of a PostgreSQL
// URL or key=value string replaced by xxxxx, also when the rest does not
// parse. Anything else is returned as given.
func Redact(s string) string {
	if isDSN(s) {
		return dsnPassword.ReplaceAllString(s, "${1}xxxxx")
	}
	if strings.Contains(s, "://") {
		if u, err := url.Parse(s); err == nil {
			return u.Redacted()
		}
	}
	// A URL that does not parse (a bad port, a bad escape, an '@' in the
	// password, a missing "//"): cut the user info's password out by hand.
	if m := urlPassword.FindStringSubmatch(s); m != nil {
		return m[1] + "xxxxx@" + m[3]
	}
	return s
}

// WithPassword returns the PostgreSQL URL or key=value string db with
// password set, for a password read from a file: the password is never on
// the command line. It refuses a db that already holds a password, or is
// not PostgreSQL.
func WithPassword(db, password string) (string, error) {
	switch {
	case password == "":
		return "", errors.New("the password is empty")
	case isDSN(db):
		if dsnPassword.MatchString(db) {
			return "", fmt.Errorf("%s already holds a password", Redact(db))
		}
		quoted := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(password)
		return db + " password='" + quoted + "'", nil
	case isPostgresURL(db):
		u, err := url.Parse(db)
		if err != nil {
			return "", fmt.Errorf("store URL %s: %w", Redact(db), redactErr(err))
		}
		if _, has := u.User.Password(); has {
			return "", fmt.Errorf("%s already holds a password", Redact(db))
		}
		u.User = url.UserPassword(u.User.Username(), password)
		return u.String(), nil
	}
	return "", fmt.Errorf("a password is for PostgreSQL, and %s is not a PostgreSQL URL or key=value string", Redact(db))
}

// ReadPasswordFile reads a password from a file: its content without the
// final line break.
func ReadPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("couldn't read the database password: %w", err)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return "", fmt.Errorf("the database password file %s is empty", path)
	}
	return pw, nil
}

// Resolve returns the store URL a command opens: flag (--db) when set,
// else the environment's ACSLEDGER_DB_URL, else "" (the embedded store's
// default directory); with the password of passwordFile when it is set.
func Resolve(flag, passwordFile string) (string, error) {
	return resolve(flag, EnvURL, passwordFile)
}

// ResolveRead is Resolve for the read replica: flag (--db-read) when set,
// else the environment's ACSLEDGER_DB_READ_URL, else "" (none); with the
// password of passwordFile when it is set.
func ResolveRead(flag, passwordFile string) (string, error) {
	db, err := resolve(flag, EnvReadURL, passwordFile)
	if err == nil && db != "" && !isPostgresURL(db) && !isDSN(db) {
		return "", fmt.Errorf("read replica %s: a read replica is a PostgreSQL URL or key=value string", Redact(db))
	}
	return db, err
}

func resolve(flag, env, passwordFile string) (string, error) {
	db := flag
	if db == "" {
		db = os.Getenv(env)
	}
	if passwordFile == "" {
		return db, nil
	}
	pw, err := ReadPasswordFile(passwordFile)
	if err != nil {
		return "", err
	}
	return WithPassword(db, pw)
}

// redactErr drops the text of a url.Error, which quotes the URL whole.
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
