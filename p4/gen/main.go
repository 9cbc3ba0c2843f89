// Command gen writes p4/include/dta_constants.p4 (run by go generate ./p4).
package main

import (
	"log"
	"os"

	"github.com/dtakit/dtakit/p4/internal/p4gen"
)

func main() {
	if err := os.WriteFile("include/dta_constants.p4", p4gen.Generate(), 0o644); err != nil {
		log.Fatal(err)
	}
}
