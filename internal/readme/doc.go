// Package readme holds the tests that keep README.md and the pages of docs/
// true to the code: every Go snippet in them compiles against the public
// API, every shell block meant to end runs to its end, the README's Quick
// start builds in a module of its own and prints what the README shows,
// every relative link resolves, and the README stays short and gives the
// test command that .ci/run runs.
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
//
// The README's Quick start is three blocks: the program ("<!-- readme:
// quick start -->" above a Go block), the output it prints ("<!-- readme:
// output -->", the first such block after the program) and the commands
// that build and run it ("<!-- readme: quick start -->" above a shell
// block), which run in an empty directory holding the program as
// app/main.go beside a clone of this repository as tollgate/ (a link to
// this checkout).
package readme
