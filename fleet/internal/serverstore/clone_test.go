package serverstore

import (
	"reflect"
	"testing"
	"time"
)

// TestCloneSharesNoMemory fills every field of the records (through
// reflection, so that a field added later is covered) and checks that no
// pointer, slice or map of the copy is the original's.
func TestCloneSharesNoMemory(t *testing.T) {
	var task Task
	fill(reflect.ValueOf(&task).Elem())
	var in Instance
	fill(reflect.ValueOf(&in).Elem())
	var td TaskDone
	fill(reflect.ValueOf(&td).Elem())
	for name, pair := range map[string][2]any{
		"Task":     {task, task.Clone()},
		"Instance": {in, in.Clone()},
		"TaskDone": {td, td.Clone()},
	} {
		a, b := reflect.ValueOf(pair[0]), reflect.ValueOf(pair[1])
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s: the copy differs", name)
		}
		if path := shared(a, b, name); path != "" {
			t.Errorf("the copy shares %s with the original", path)
		}
	}
}

// fill sets every field of v to a non-zero value, allocating what it
// points to.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1, 0)))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i))
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint64:
		v.SetUint(1)
	case reflect.Float64:
		v.SetFloat(1)
	}
}

// shared returns the path of the first pointer, slice or map a and b
// share, or "".
func shared(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Struct:
		if a.Type() == reflect.TypeFor[time.Time]() {
			return "" // its location is never changed
		}
		for i := range a.NumField() {
			if p := shared(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
				return p
			}
		}
	case reflect.Pointer:
		if a.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		return shared(a.Elem(), b.Elem(), path)
	case reflect.Slice, reflect.Map:
		if !a.IsNil() && a.Pointer() == b.Pointer() {
			return path
		}
		if a.Kind() == reflect.Slice {
			for i := range a.Len() {
				if p := shared(a.Index(i), b.Index(i), path+"[]"); p != "" {
					return p
				}
			}
		}
	}
	return ""
}
