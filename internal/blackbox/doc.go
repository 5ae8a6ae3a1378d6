// Package blackbox holds black-box tests of `drover server`: they build the
// binary, run it as a real process on loopback over a real PostgreSQL schema or
// SQLite file, and speak to it with net/http only, as any client in any language
// would. It has no non-test code.
package blackbox
