// Package p4 holds dtakit's P4 programs for Tofino-1 (translator/, reporter/)
// and Tofino-2 (translator/translator_t2.p4) and their generated include;
// its tests check the include is current, that every hash the programs
// instantiate is one dta/tofino models, and that the programs compile with
// the open-source Tofino back end.
package p4

//go:generate go run ./gen
