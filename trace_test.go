package tollgate_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/tollgate/tollgate"
)

// traceKey marks the context a Trace function is called with.
type traceKey struct{}

// TestMergeCallsBoth: every field of a merged Trace calls the first
// Trace's function, then the second's, each with the arguments it was
// called with; a field set on one side only is that side's function
// itself; a field set on neither stays nil. It reads the fields by
// reflection, so that a field added to Trace and forgotten by Merge fails
// here.
func TestMergeCallsBoth(t *testing.T) {
	typ := reflect.TypeFor[tollgate.Trace]()
	if typ.NumField() == 0 {
		t.Fatal("Trace has no fields")
	}
	for i := range typ.NumField() {
		field := typ.Field(i)
		t.Run(field.Name, func(t *testing.T) {
			ft := field.Type
			if ft.Kind() != reflect.Func || ft.NumIn() == 0 || ft.In(0) != reflect.TypeFor[context.Context]() || ft.NumOut() != 0 {
				t.Fatalf("Trace.%s is a %v, want a func(context.Context, ...) with no results", field.Name, ft)
			}
			// Arguments that are not zero where a zero would hide a mix-up.
			ctx := context.WithValue(context.Background(), traceKey{}, field.Name)
			args := []reflect.Value{reflect.ValueOf(ctx)}
			for j := 1; j < ft.NumIn(); j++ {
				v := reflect.New(ft.In(j)).Elem()
				switch v.Kind() {
				case reflect.String:
					v.SetString("arg" + string(rune('0'+j)))
				case reflect.Bool:
					v.SetBool(true)
				}
				args = append(args, v)
			}
			var calls []string
			recorder := func(name string) reflect.Value {
				return reflect.MakeFunc(ft, func(in []reflect.Value) []reflect.Value {
					if len(in) != len(args) {
						t.Errorf("%s called with %d arguments, want %d", name, len(in), len(args))
					}
					for j := range in {
						if !reflect.DeepEqual(in[j].Interface(), args[j].Interface()) {
							t.Errorf("%s got argument %d = %v, want %v", name, j, in[j], args[j])
						}
					}
					calls = append(calls, name)
					return nil
				})
			}
			traceWith := func(f reflect.Value) tollgate.Trace {
				var tr tollgate.Trace
				reflect.ValueOf(&tr).Elem().Field(i).Set(f)
				return tr
			}
			first, second := recorder("first"), recorder("second")
			only := func(tr tollgate.Trace) reflect.Value {
				v := reflect.ValueOf(tr)
				for k := range typ.NumField() {
					if k != i && !v.Field(k).IsNil() {
						t.Errorf("Merge set Trace.%s, which neither side set", typ.Field(k).Name)
					}
				}
				return v.Field(i)
			}

			both := only(traceWith(first).Merge(traceWith(second)))
			if both.IsNil() {
				t.Fatalf("Merge left Trace.%s nil", field.Name)
			}
			both.Call(args)
			if want := []string{"first", "second"}; !slices.Equal(calls, want) {
				t.Errorf("the merged Trace.%s called %q, want %q", field.Name, calls, want)
			}

			for _, c := range []struct {
				name   string
				merged tollgate.Trace
				want   reflect.Value
			}{
				{"first only", traceWith(first).Merge(tollgate.Trace{}), first},
				{"second only", tollgate.Trace{}.Merge(traceWith(second)), second},
			} {
				calls = nil
				got := only(c.merged)
				if got.IsNil() {
					t.Fatalf("%s: Merge left Trace.%s nil", c.name, field.Name)
				}
				if got.Pointer() != c.want.Pointer() {
					t.Errorf("%s: Merge wrapped Trace.%s, want the function itself", c.name, field.Name)
				}
				got.Call(args)
				if want := []string{c.name[:len(c.name)-len(" only")]}; !slices.Equal(calls, want) {
					t.Errorf("%s: the merged Trace.%s called %q, want %q", c.name, field.Name, calls, want)
				}
			}

			if f := only(tollgate.Trace{}.Merge(tollgate.Trace{})); !f.IsNil() {
				t.Errorf("merging two zero Traces set Trace.%s", field.Name)
			}
		})
	}
}
