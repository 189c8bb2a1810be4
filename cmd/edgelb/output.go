package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// Output formats of -o/--output.
const (
	outTable = "table"
	outWide  = "wide" // the table with more columns, as kubectl's
	outJSON  = "json"
	outYAML  = "yaml"
)

// choiceFlag is a flag taking one of a fixed set of words: pflag checks
// the value while parsing, so a bad one is a usage error naming the flag
// ("invalid argument "xml" for "-o, --output" flag: want table, json…").
type choiceFlag struct {
	val     string
	allowed []string
}

func (f *choiceFlag) String() string { return f.val }
func (f *choiceFlag) Type() string   { return "string" }
func (f *choiceFlag) Set(s string) error {
	for _, a := range f.allowed {
		if s == a {
			f.val = s
			return nil
		}
	}
	return fmt.Errorf("want %s", strings.Join(f.allowed, ", "))
}

// addChoiceFlag defines --name/-short on c, completing to the allowed words.
func addChoiceFlag(c *cobra.Command, name, short, usage string, allowed ...string) *choiceFlag {
	f := &choiceFlag{val: allowed[0], allowed: allowed}
	c.Flags().VarP(f, name, short, usage+": "+strings.Join(allowed, ", "))
	_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(allowed, cobra.ShellCompDirectiveNoFileComp))
	return f
}

// addOutputFlag is -o/--output with the given formats, the first the default.
func addOutputFlag(c *cobra.Command, formats ...string) *choiceFlag {
	return addChoiceFlag(c, "output", "o", "output format", formats...)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeYAML writes v through its JSON form, so the keys are the API's.
func writeYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// writeStructured writes v as json or yaml; false for the table formats.
func writeStructured(w io.Writer, format string, v any) (bool, error) {
	switch format {
	case outJSON:
		return true, writeJSON(w, v)
	case outYAML:
		return true, writeYAML(w, v)
	}
	return false, nil
}
