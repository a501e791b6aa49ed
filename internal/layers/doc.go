// Package layers holds one test: every package imports only packages of
// its own layer or below, so that reading the tree from the bottom up
// never needs a package above.
package layers
