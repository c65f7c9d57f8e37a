package control

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
)

// Settings are KEY=VALUE changes to the two configuration documents, as
// `birdcage up --felix/--bgp` and `birdcage set felix.K=V bgp.K=V` take
// them. Keys are the documents' JSON field names; an empty value unsets a
// field.
type Settings struct {
	Felix []string `json:"felix,omitempty"`
	BGP   []string `json:"bgp,omitempty"`
	// AllowUnknown lets programClusterRoutes take a value outside the
	// enum, which the datastore accepts and both sides resolve to their
	// release default (the design's rule for unknown values).
	AllowUnknown bool `json:"allowUnknown,omitempty"`
}

// ParseQualified splits "felix.K=V" and "bgp.K=V" arguments into Settings.
func ParseQualified(args []string, allowUnknown bool) (Settings, error) {
	s := Settings{AllowUnknown: allowUnknown}
	for _, a := range args {
		doc, kv, ok := strings.Cut(a, ".")
		switch {
		case ok && doc == "felix":
			s.Felix = append(s.Felix, kv)
		case ok && doc == "bgp":
			s.BGP = append(s.BGP, kv)
		default:
			return s, fmt.Errorf("setting %q: want felix.KEY=VALUE (FelixConfiguration: %s) or bgp.KEY=VALUE (BGPConfiguration: %s)",
				a, strings.Join(fieldNames(reflect.TypeOf(datastore.FelixConfiguration{})), ", "),
				strings.Join(fieldNames(reflect.TypeOf(datastore.BGPConfiguration{})), ", "))
		}
	}
	if len(s.Felix)+len(s.BGP) == 0 {
		return s, fmt.Errorf("nothing to set: give felix.KEY=VALUE or bgp.KEY=VALUE, e.g. felix.programClusterRoutes=Enabled bgp.programClusterRoutes=Disabled")
	}
	return s, nil
}

// Apply changes f and b in place and validates both documents with the
// datastore's own validation, so an error names the field and what is valid.
func (s Settings) Apply(f *datastore.FelixConfiguration, b *datastore.BGPConfiguration) error {
	if err := apply("felix", f, s.Felix, s.AllowUnknown); err != nil {
		return err
	}
	if err := apply("bgp", b, s.BGP, s.AllowUnknown); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return fmt.Errorf("felix (FelixConfiguration): %w", err)
	}
	if err := b.Validate(); err != nil {
		return fmt.Errorf("bgp (BGPConfiguration): %w", err)
	}
	return nil
}

// OnlyProgramClusterRoutes reports whether the settings change nothing but
// the two programClusterRoutes fields, the operator's change that
// Cluster.SetProgramClusterRoutes makes.
func (s Settings) OnlyProgramClusterRoutes() bool {
	for _, kv := range append(append([]string(nil), s.Felix...), s.BGP...) {
		if k, _, _ := strings.Cut(kv, "="); k != "programClusterRoutes" {
			return false
		}
	}
	return true
}

func fieldNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if n, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); n != "" && n != "-" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func apply(doc string, ptr any, kvs []string, allowUnknown bool) error {
	v := reflect.ValueOf(ptr).Elem()
	t := v.Type()
	fields := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		if n, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); n != "" && n != "-" {
			fields[n] = i
		}
	}
	valid := strings.Join(fieldNames(t), ", ")
	for _, kv := range kvs {
		key, val, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%s setting %q: want KEY=VALUE (keys: %s)", doc, kv, valid)
		}
		i, ok := fields[key]
		if !ok {
			for n := range fields {
				if strings.EqualFold(n, key) {
					return fmt.Errorf("%s.%s: unknown key; did you mean %s? (keys are case-sensitive: %s)", doc, key, n, valid)
				}
			}
			return fmt.Errorf("%s.%s: unknown key; valid keys are %s", doc, key, valid)
		}
		fv := v.Field(i)
		if err := setValue(fv, val); err != nil {
			return fmt.Errorf("%s.%s=%q: %w", doc, key, val, err)
		}
		if key == "programClusterRoutes" && val != "" && !allowUnknown && !config.ProgramClusterRoutes(val).Valid() {
			return fmt.Errorf("%s.programClusterRoutes=%q: valid values are %s (empty unsets it; --allow-unknown writes it anyway, and both sides then use their release default)",
				doc, val, config.ValidValues())
		}
	}
	return nil
}

func setValue(fv reflect.Value, val string) error {
	if val == "" {
		fv.Set(reflect.Zero(fv.Type()))
		return nil
	}
	target := fv
	if fv.Kind() == reflect.Pointer {
		target = reflect.New(fv.Type().Elem()).Elem()
	}
	switch target.Kind() {
	case reflect.String:
		target.SetString(val)
	case reflect.Int:
		n, err := strconv.Atoi(val)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		target.SetInt(int64(n))
	case reflect.Bool:
		b, err := strconv.ParseBool(val)
		if err != nil {
			return fmt.Errorf("not true or false")
		}
		target.SetBool(b)
	default:
		return fmt.Errorf("cannot be set from the command line (type %s)", target.Type())
	}
	if fv.Kind() == reflect.Pointer {
		p := reflect.New(target.Type())
		p.Elem().Set(target)
		fv.Set(p)
	}
	return nil
}
