// Package readmeshell holds the test that runs README.md's shell blocks
// in order, as written, from a fresh copy of the checkout inside a
// private network namespace. It has no code of its own.
package readmeshell
