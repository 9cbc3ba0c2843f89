package translator

import (
	"reflect"
	"testing"
)

// TestCountersAdd: Counters.add adds every field, arrays included.
func TestCountersAdd(t *testing.T) {
	var c Counters
	v := reflect.ValueOf(&c).Elem()
	n := uint64(0)
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() == reflect.Array {
			for j := range f.Len() {
				n++
				f.Index(j).SetUint(n)
			}
			continue
		}
		n++
		f.SetUint(n)
	}
	d := c
	d.add(c)
	w := reflect.ValueOf(d)
	n = 0
	for i := range w.NumField() {
		f := w.Field(i)
		name := w.Type().Field(i).Name
		if f.Kind() == reflect.Array {
			for j := range f.Len() {
				n++
				if f.Index(j).Uint() != 2*n {
					t.Errorf("field %s[%d]: %d, want %d", name, j, f.Index(j).Uint(), 2*n)
				}
			}
			continue
		}
		n++
		if f.Uint() != 2*n {
			t.Errorf("field %s: %d, want %d", name, f.Uint(), 2*n)
		}
	}
}
