// Package readme holds the tests that keep README.md true to the code: every
// Go snippet in it compiles against the public API, and every shell block
// meant to end runs to its end.
//
// A Go block that starts with "package" is a whole program. Any other is a
// fragment, compiled inside a harness chosen by the HTML comment just above
// the block: "<!-- readme: statements -->" (the default) puts it in a
// function body, with package-level variables for the names fragments
// commonly use (rdb, tr, transport, ctx, keys, err, w, r); "<!-- readme:
// config -->" puts it between the braces of a tollgate.Config literal.
// "<!-- readme: clienttest -->" marks a whole program that uses an
// official client: it is compiled in the clienttest module, which
// requires the clients. "<!-- readme: not run -->" above a shell block
// keeps the test from running it.
package readme
