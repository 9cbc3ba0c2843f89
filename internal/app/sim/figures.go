package sim

import (
	"bytes"
	"os"
	"path/filepath"
)

// Spec names a figure and the function that makes it.
type Spec struct {
	Name, About string
	Run         func(Config) (*Figure, error)
}

// Figures are every figure dtasim draws, in order.
var Figures = []Spec{
	{"keywrite-alpha", "DTA Fig. 12: Key-Write success vs load, N = 1..4, best N marked", KeyWriteAlpha},
	{"keywrite-age", "DTA Fig. 13 / DART Fig. 4: Key-Write success vs key age, three sizes", KeyWriteAge},
	{"keywrite-wrong", "DART Fig. 5: Key-Write wrong answers vs checksum bits", KeyWriteWrong},
	{"postcard-flows", "DTA Fig. 14: Postcarding success vs intermediate flows, cache size and eviction", PostcardFlows},
	{"append-loss", "Append loss vs reader lag and ring size", AppendLoss},
	{"keyincr-error", "Key-Increment count-min error vs width and depth", KeyIncrementError},
}

// Lookup returns the spec named name, or nil.
func Lookup(name string) *Spec {
	for i := range Figures {
		if Figures[i].Name == name {
			return &Figures[i]
		}
	}
	return nil
}

// Write writes f as dir/NAME.csv, .svg and .png.
func Write(f *Figure, dir string) error {
	var csv bytes.Buffer
	if err := f.WriteCSV(&csv); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, f.Name+".csv"), csv.Bytes(), 0o644); err != nil {
		return err
	}
	for _, format := range []string{"svg", "png"} {
		b, err := f.Render(format)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name+"."+format), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
