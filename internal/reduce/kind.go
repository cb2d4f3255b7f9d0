package reduce

import "reflect"

// kinds maps the reflect.Kind of an element type to its DType.
var kinds = [...]DType{reflect.Int8: Int8, reflect.Uint8: Uint8, reflect.Int32: Int32, reflect.Uint32: Uint32,
	reflect.Int64: Int64, reflect.Uint64: Uint64, reflect.Float32: Float32, reflect.Float64: Float64}

// OfKind returns the DType of an element type of kind k (a named type
// over one of the integer or float types), or 0 for a kind that is none.
func OfKind(k reflect.Kind) DType {
	if int(k) >= len(kinds) {
		return 0
	}
	return kinds[k]
}
