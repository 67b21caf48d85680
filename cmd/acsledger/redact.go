package main

import "net/url"

// redact hides the password of a database URL before it is logged. A
// directory path of the embedded store, or a URL without a password, is
// returned as given.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
