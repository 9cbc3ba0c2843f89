package jsonconf

import (
	"strings"
	"testing"
)

func TestDecodePosition(t *testing.T) {
	type inner struct {
		Slots int `json:"slots"`
	}
	type config struct {
		Instances []inner `json:"instances"`
	}
	for _, c := range []struct{ name, json, want string }{
		{"ok", "{\"instances\": [{\"slots\": 8}]}\n", ""},
		{"comma", "{\"instances\": [\n  {\"slots\": 1024,}\n]}\n", "c.json:2:18: invalid character '}'"},
		{"type", "{\"instances\": [\n  {\n   \"slots\": \"1024\"}\n]}\n", "c.json:3:4: json: cannot unmarshal string"},
		{"unknown", "{\"instances\": [\n  {\"slotz\": 1024}\n]}\n", `c.json:2:4: json: unknown field "slotz"`},
		{"short", "{\"instances\": [\n  {\"slots\": 1\n", "c.json:3:1: unexpected EOF"},
		{"trailing", "{\"instances\": []}\n{}", "c.json:2:1: more after"},
	} {
		var v config
		err := Decode("c.json", []byte(c.json), &v)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
