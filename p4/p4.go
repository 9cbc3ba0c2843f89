// Package p4 holds dtakit's Tofino-1 P4 programs (translator/, reporter/)
// and their generated include; its tests check the include is current, that
// every hash the programs instantiate is one dta/tofino models, and that the
// programs compile with the open-source Tofino back end.
package p4

//go:generate go run ./gen
