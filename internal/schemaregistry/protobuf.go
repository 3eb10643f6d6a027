package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/reporter"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Protobuf: compiled with bufbuild/protocompile from memory: the schema
// as one .proto file, each reference as the file its import path names,
// and the well-known types (google/protobuf/*.proto) built in. Nothing
// is read from disk.
//
// Compatibility follows the Protobuf rules of Confluent's registry,
// which compare an original schema (the writer's) with an update (the
// reader's): changing the package, removing a message or enum type,
// changing a field's kind (scalar, message, enum) or its scalar type
// beyond the wire-compatible groups (int32, uint32, int64, uint64 and
// bool; sint32 and sint64; fixed32 and sfixed32; fixed64 and sfixed64;
// string and bytes), changing a field's message or enum type, adding
// or removing a proto2 required field, moving a field into an existing
// oneof, or moving several fields into a new one are incompatible;
// adding or removing fields, messages (in the original's direction),
// enum values and reserved ranges are compatible. With the update as
// the writer (FORWARD), a message the update added is one the original
// lacks, so adding message types is not forward compatible, as
// Confluent's documentation warns.

// protoMain is the file name the registered schema is compiled under.
const protoMain = "sluice_registered_schema.proto"

type protoSchema struct {
	text string
	file protoreflect.FileDescriptor
}

func parseProtobuf(text string, deps []namedSchema) (parsed, error) {
	files := map[string]string{protoMain: text}
	for _, d := range deps {
		files[d.name] = d.schema
	}
	var errs []error
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(files),
		}),
		Reporter: reporter.NewReporter(func(err reporter.ErrorWithPos) error {
			errs = append(errs, err)
			return nil
		}, nil),
	}
	fs, err := c.Compile(context.Background(), protoMain)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err != nil {
		return nil, err
	}
	return &protoSchema{text: text, file: fs[0]}, nil
}

func (p *protoSchema) canonical(normalize bool) string {
	return canonicalText(typeProtobuf, p.text, normalize)
}

// protoTokens is a .proto text without comments, one space between
// tokens and a line break after each ';', '{' and '}'.
func protoTokens(text string) string {
	var b strings.Builder
	space := false
	emit := func(s string) {
		if space && b.Len() > 0 {
			last := b.String()[b.Len()-1]
			if last != '\n' {
				b.WriteByte(' ')
			}
		}
		b.WriteString(s)
		space = true
	}
	for i := 0; i < len(text); {
		ch := text[i]
		switch {
		case ch == '/' && i+1 < len(text) && text[i+1] == '/':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case ch == '/' && i+1 < len(text) && text[i+1] == '*':
			end := strings.Index(text[i+2:], "*/")
			if end < 0 {
				i = len(text)
			} else {
				i += end + 4
			}
		case ch == '"' || ch == '\'':
			j := i + 1
			for j < len(text) && text[j] != ch {
				if text[j] == '\\' {
					j++
				}
				j++
			}
			emit(text[i:min(j+1, len(text))])
			i = j + 1
		case unicode.IsSpace(rune(ch)):
			i++
		case ch == '_' || ch == '.' || unicode.IsLetter(rune(ch)) || unicode.IsDigit(rune(ch)) || ch == '-' || ch == '+':
			j := i
			for j < len(text) && (text[j] == '_' || text[j] == '.' || unicode.IsLetter(rune(text[j])) || unicode.IsDigit(rune(text[j])) || text[j] == '-' || text[j] == '+') {
				j++
			}
			emit(text[i:j])
			i = j
		default:
			emit(string(ch))
			if ch == ';' || ch == '{' || ch == '}' {
				b.WriteByte('\n')
				space = false
			}
			i++
		}
	}
	return strings.TrimSpace(b.String())
}

func (p *protoSchema) canRead(writer parsed) []string {
	w, ok := writer.(*protoSchema)
	if !ok {
		return []string{"the schemas are of different types"}
	}
	return protoDiff(w.file, p.file)
}

// protoDiff lists the incompatible differences from original to update.
func protoDiff(original, update protoreflect.FileDescriptor) []string {
	var msgs []string
	fail := func(format string, args ...any) { msgs = append(msgs, fmt.Sprintf(format, args...)) }
	if original.Package() != update.Package() {
		fail("package changed from %q to %q", original.Package(), update.Package())
	}
	umsgs := map[protoreflect.FullName]protoreflect.MessageDescriptor{}
	uenums := map[protoreflect.FullName]bool{}
	walkProto(update.Messages(), update.Enums(), func(m protoreflect.MessageDescriptor) { umsgs[m.FullName()] = m },
		func(e protoreflect.EnumDescriptor) { uenums[e.FullName()] = true })
	walkProto(original.Messages(), original.Enums(), func(om protoreflect.MessageDescriptor) {
		um, ok := umsgs[om.FullName()]
		if !ok {
			fail("message %s removed", om.FullName())
			return
		}
		protoFields(om, um, fail)
	}, func(e protoreflect.EnumDescriptor) {
		if !uenums[e.FullName()] {
			fail("enum %s removed", e.FullName())
		}
	})
	return msgs
}

func walkProto(ms protoreflect.MessageDescriptors, es protoreflect.EnumDescriptors, fm func(protoreflect.MessageDescriptor), fe func(protoreflect.EnumDescriptor)) {
	for i := range es.Len() {
		fe(es.Get(i))
	}
	for i := range ms.Len() {
		m := ms.Get(i)
		if m.IsMapEntry() {
			continue
		}
		fm(m)
		walkProto(m.Messages(), m.Enums(), fm, fe)
	}
}

// protoWireGroup numbers the groups of scalar kinds whose values read
// as one another.
func protoWireGroup(k protoreflect.Kind) int {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Uint32Kind, protoreflect.Int64Kind, protoreflect.Uint64Kind, protoreflect.BoolKind:
		return 1
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return 2
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return 3
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return 4
	case protoreflect.StringKind, protoreflect.BytesKind:
		return 5
	}
	return 100 + int(k)
}

func protoFields(om, um protoreflect.MessageDescriptor, fail func(string, ...any)) {
	ofs, ufs := om.Fields(), um.Fields()
	movedToNew := map[protoreflect.Name]int{}
	for i := range ofs.Len() {
		of := ofs.Get(i)
		uf := ufs.ByNumber(of.Number())
		if uf == nil {
			if of.Cardinality() == protoreflect.Required {
				fail("%s: required field %d removed", om.FullName(), of.Number())
			}
			continue
		}
		where := fmt.Sprintf("%s field %d", om.FullName(), of.Number())
		ok, uk := of.Kind(), uf.Kind()
		switch {
		case of.IsMap() != uf.IsMap():
			fail("%s: changed between a map and a non-map field", where)
		case of.IsMap():
			if !sameProtoType(of.MapKey(), uf.MapKey()) || !sameProtoType(of.MapValue(), uf.MapValue()) {
				fail("%s: map key or value type changed", where)
			}
		case protoKindClass(ok) != protoKindClass(uk):
			fail("%s: kind changed from %s to %s", where, ok, uk)
		case !sameProtoType(of, uf):
			fail("%s: type changed from %s to %s", where, protoTypeName(of), protoTypeName(uf))
		}
		if (of.Cardinality() == protoreflect.Required) != (uf.Cardinality() == protoreflect.Required) {
			fail("%s: required label added or removed", where)
		}
		oo, uo := realOneof(of), realOneof(uf)
		if oo == nil && uo != nil {
			if om.Oneofs().ByName(uo.Name()) != nil {
				fail("%s: moved into the existing oneof %s", where, uo.Name())
			} else {
				movedToNew[uo.Name()]++
			}
		}
	}
	for name, n := range movedToNew {
		if n > 1 {
			fail("%s: %d fields moved into the new oneof %s", om.FullName(), n, name)
		}
	}
	for i := range ufs.Len() {
		uf := ufs.Get(i)
		if ofs.ByNumber(uf.Number()) == nil && uf.Cardinality() == protoreflect.Required {
			fail("%s: required field %d added", om.FullName(), uf.Number())
		}
	}
}

func realOneof(f protoreflect.FieldDescriptor) protoreflect.OneofDescriptor {
	o := f.ContainingOneof()
	if o == nil || o.IsSynthetic() {
		return nil
	}
	return o
}

// protoKindClass is 0 for scalars, 1 for messages and groups, 2 for enums.
func protoKindClass(k protoreflect.Kind) int {
	switch k {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return 1
	case protoreflect.EnumKind:
		return 2
	}
	return 0
}

func sameProtoType(a, b protoreflect.FieldDescriptor) bool {
	switch protoKindClass(a.Kind()) {
	case 1:
		return protoKindClass(b.Kind()) == 1 && a.Message().FullName() == b.Message().FullName()
	case 2:
		return protoKindClass(b.Kind()) == 2 && a.Enum().FullName() == b.Enum().FullName()
	}
	return protoKindClass(b.Kind()) == 0 && protoWireGroup(a.Kind()) == protoWireGroup(b.Kind())
}

func protoTypeName(f protoreflect.FieldDescriptor) string {
	switch protoKindClass(f.Kind()) {
	case 1:
		return string(f.Message().FullName())
	case 2:
		return string(f.Enum().FullName())
	}
	return f.Kind().String()
}
