package main

// The primitives whose reports dtadump names the fields of: each registers
// itself with package primitive.
import (
	_ "github.com/dtakit/dtakit/appendlist"
	_ "github.com/dtakit/dtakit/keyincr"
	_ "github.com/dtakit/dtakit/keywrite"
	_ "github.com/dtakit/dtakit/postcard"
)
