package access

// Names of the package's internals for its external tests.
type AuthErrorBody = authErrorBody

var WellFormed = wellFormed
