// Package bench compares tollgate's decisions with its peers on a real
// redis-server. It is a module of its own so that the peers never become
// dependencies of tollgate. Run it from this directory:
//
//	go test -run '^$' -bench . -benchmem
package bench
