package cli

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// protoValue is m as a value for encoding/json, in the shape of protojson with proto field
// names and every field present, except that 64-bit integers are JSON numbers (protojson
// writes them as strings): scripts read `.epoch`, not `.epoch | tonumber`. Objects' keys are
// sorted by encoding/json, so the output is stable.
func protoValue(m protoreflect.Message) map[string]any {
	out := map[string]any{}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil && !fd.ContainingOneof().IsSynthetic() && !m.Has(fd) {
			continue // an unset oneof member is absent, as in protojson
		}
		v := m.Get(fd)
		switch {
		case fd.IsList():
			l := v.List()
			arr := make([]any, l.Len())
			for j := range l.Len() {
				arr[j] = scalarValue(fd, l.Get(j))
			}
			out[string(fd.Name())] = arr
		case fd.IsMap():
			obj := map[string]any{}
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				obj[k.String()] = scalarValue(fd.MapValue(), mv)
				return true
			})
			out[string(fd.Name())] = obj
		case fd.Message() != nil && !m.Has(fd):
			out[string(fd.Name())] = nil
		default:
			out[string(fd.Name())] = scalarValue(fd, v)
		}
	}
	return out
}

func scalarValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return protoValue(v.Message())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return int32(v.Enum())
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes())
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return json.Number(strconv.FormatInt(v.Int(), 10))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return json.Number(strconv.FormatUint(v.Uint(), 10))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f := v.Float()
		switch {
		case math.IsNaN(f):
			return "NaN"
		case math.IsInf(f, 1):
			return "Infinity"
		case math.IsInf(f, -1):
			return "-Infinity"
		}
		return f
	}
	return v.Interface()
}
