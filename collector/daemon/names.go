package daemon

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// oldSpellings are the names the primitives went by before they had one
// each (logs and /v1/instances said key-write, key-increment and
// postcarding; the Go packages are keyincr and appendlist), mapped to the
// identifier configurations, HTTP paths, logs, /metrics and exported files
// use now (dta.Opcode's String).
var oldSpellings = map[string]string{
	"key-write":     "keywrite",
	"key-increment": "keyincrement",
	"keyincr":       "keyincrement",
	"postcarding":   "postcard",
	"appendlist":    "append",
}

// primitiveName is name's identifier: lower case, an old spelling
// replaced; old reports whether it was one.
func primitiveName(name string) (id string, old bool) {
	id = strings.ToLower(name)
	if n, ok := oldSpellings[id]; ok {
		return n, true
	}
	return id, false
}

// canonicalPrimitives returns ins with each primitive spelled as its
// identifier. An old spelling is accepted with a warning naming the new
// one.
func canonicalPrimitives(ins []Instance, log *slog.Logger) []Instance {
	ins = slices.Clone(ins)
	for i := range ins {
		id, old := primitiveName(ins[i].Primitive)
		if old {
			log.Warn(fmt.Sprintf("configuration: instance %d: primitive %q is an old spelling, use %q", i, ins[i].Primitive, id),
				"instance", i, "primitive", ins[i].Primitive, "use", id)
		}
		ins[i].Primitive = id
	}
	return ins
}
