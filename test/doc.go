// Package test holds the tests that run real kvnode processes: crashes (kill -9) only
// a separate process can show.
package test
