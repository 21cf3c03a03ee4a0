// Package sqlstoretest opens fresh sqlstore stores for tests: a SQLite
// file under t.TempDir() always, and a PostgreSQL store on a new schema
// when ANVIL_TEST_POSTGRES_DSN is set (the test skips otherwise).
//
// It lives apart from baremetal/storetest so that the conformance suite,
// which any Store implementation runs, depends only on package baremetal
// and never links this implementation or its database drivers.
package sqlstoretest
