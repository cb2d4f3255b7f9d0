package reduce

import (
	"reflect"
	"testing"
)

func TestOfKind(t *testing.T) {
	for k, want := range map[reflect.Kind]DType{reflect.Int8: Int8, reflect.Uint8: Uint8, reflect.Int32: Int32,
		reflect.Uint32: Uint32, reflect.Int64: Int64, reflect.Uint64: Uint64, reflect.Float32: Float32,
		reflect.Float64: Float64, reflect.Int: 0, reflect.Uint16: 0, reflect.String: 0, reflect.UnsafePointer: 0, reflect.Invalid: 0} {
		if got := OfKind(k); got != want {
			t.Errorf("OfKind(%v) = %v, want %v", k, got, want)
		}
	}
}
