// Package jsonconf decodes the daemons' JSON configuration files strictly
// (unknown fields and trailing text are errors), and says where an error
// is: file, line and column.
package jsonconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Decode decodes b, the contents of the file at path, into v. An error
// names the file, line and column (path:line:col).
func Decode(path string, b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		line, col := jsonPosition(b, err)
		return fmt.Errorf("%s:%d:%d: %w", path, line, col, err)
	}
	if dec.More() {
		line, col := position(b, dec.InputOffset())
		return fmt.Errorf("%s:%d:%d: more after the configuration's object", path, line, col)
	}
	return nil
}

// jsonPosition is the line and column (from 1) where err, an error of
// json.Decoder.Decode over b, was found.
func jsonPosition(b []byte, err error) (line, col int) {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return position(b, syntax.Offset-1)
	case errors.As(err, &typ):
		// The offset is past the value; the field's name starts it.
		off := typ.Offset
		if i := bytes.LastIndex(b[:off], []byte(`"`+typ.Field[strings.LastIndex(typ.Field, ".")+1:]+`"`)); i >= 0 {
			off = int64(i)
		}
		return position(b, off)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return position(b, int64(len(b)))
	}
	// An unknown field: json says only its name.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if i := bytes.Index(b, []byte(name)); i >= 0 {
			return position(b, int64(i))
		}
	}
	return position(b, 0)
}

// position is the line and column (from 1) of byte off of b.
func position(b []byte, off int64) (line, col int) {
	off = max(0, min(off, int64(len(b))))
	before := b[:off]
	nl := bytes.LastIndexByte(before, '\n')
	return 1 + bytes.Count(before, []byte("\n")), int(off) - nl
}
