package graphql

import "fmt"

// MaxDepth bounds the nesting of selection sets, values and types a
// document may have: deeper documents fail rather than exhaust the stack.
const MaxDepth = 128

// Document is a parsed executable document.
type Document struct {
	// Operations are its queries, mutations and subscriptions, in order.
	Operations []*Operation
	// Fragments are its named fragments, by name.
	Fragments map[string]*Fragment
}

// Operation is one operation of a document.
type Operation struct {
	// Type is "query", "mutation" or "subscription"; the shorthand
	// "{ ... }" is a query.
	Type string
	// Name is the operation's name, e.g. "Issues"; "" for an anonymous one.
	Name string
	// Defaults are the default values of the variables it declares, by
	// name without "$"; a variable without a default is absent.
	Defaults map[string]Value
	// Selections are its top-level selections.
	Selections []Selection
}

// Fragment is a named fragment ("fragment Name on Type { ... }").
type Fragment struct {
	Name       string
	Selections []Selection
}

// Selection is a field, a fragment spread ("...Name") or an inline
// fragment ("... on Type { ... }").
type Selection struct {
	// Name and Alias are a field's name and alias, e.g. "issues" and
	// "open" for "open: issues(first: 10)"; Alias is "" when none.
	Name, Alias string
	// Arguments are a field's arguments, by name.
	Arguments map[string]Value
	// Spread names the fragment a spread selects; "" for a field or an
	// inline fragment.
	Spread string
	// Inline marks an inline fragment.
	Inline bool
	// Selections are the field's or inline fragment's selection set.
	Selections []Selection
}

// ValueKind is the kind of a value.
type ValueKind int

// The kinds of values.
const (
	Variable ValueKind = iota
	Int
	Float
	String
	Boolean
	Null
	Enum
	List
	Object
)

// Value is an argument's or default's value. Lists and objects keep
// their kind only.
type Value struct {
	Kind ValueKind
	// Text is the literal as written for Int, Float, Boolean and Enum
	// (e.g. "100", "true", "OPEN"), a String's value, and a Variable's name
	// without "$".
	Text string
}

// Parse parses an executable document. It fails with a *SyntaxError for
// anything the specification's grammar does not allow, for type system
// definitions, for two fragments or operations of one name, for an
// anonymous operation beside others, and for nesting deeper than MaxDepth.
func Parse(src string) (*Document, error) {
	p := &parser{lex: lexer{src: src}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	doc := &Document{Fragments: map[string]*Fragment{}}
	names := map[string]bool{}
	anonymous := false
	for p.tok.kind != tokEOF {
		at := p.tok.at
		switch {
		case p.isPunct("{") || p.isName("query") || p.isName("mutation") || p.isName("subscription"):
			op, err := p.operation()
			if err != nil {
				return nil, err
			}
			if op.Name == "" {
				anonymous = true
			} else if names[op.Name] {
				return nil, &SyntaxError{Offset: at, Msg: fmt.Sprintf("two operations are named %q", op.Name)}
			}
			names[op.Name] = true
			doc.Operations = append(doc.Operations, op)
		case p.isName("fragment"):
			f, err := p.fragment()
			if err != nil {
				return nil, err
			}
			if doc.Fragments[f.Name] != nil {
				return nil, &SyntaxError{Offset: at, Msg: fmt.Sprintf("two fragments are named %q", f.Name)}
			}
			doc.Fragments[f.Name] = f
		default:
			return nil, &SyntaxError{Offset: at, Msg: fmt.Sprintf("expected an operation or a fragment, found %s", p.tok.describe())}
		}
	}
	switch {
	case len(doc.Operations) == 0:
		return nil, &SyntaxError{Offset: 0, Msg: "the document has no operation"}
	case anonymous && len(doc.Operations) > 1:
		return nil, &SyntaxError{Offset: 0, Msg: "an anonymous operation must be the only one"}
	}
	return doc, nil
}

// parser reads a document with one token of lookahead.
type parser struct {
	lex   lexer
	tok   token
	depth int
}

func (p *parser) advance() error {
	t, err := p.lex.next()
	p.tok = t
	return err
}

func (p *parser) isPunct(s string) bool { return p.tok.kind == tokPunct && p.tok.text == s }
func (p *parser) isName(s string) bool  { return p.tok.kind == tokName && p.tok.text == s }

// expect consumes the punctuator s.
func (p *parser) expect(s string) error {
	if !p.isPunct(s) {
		return p.unexpected(fmt.Sprintf("%q", s))
	}
	return p.advance()
}

// name consumes a name and returns it.
func (p *parser) name() (string, error) {
	if p.tok.kind != tokName {
		return "", p.unexpected("a name")
	}
	n := p.tok.text
	return n, p.advance()
}

func (p *parser) unexpected(want string) error {
	return &SyntaxError{Offset: p.tok.at, Msg: fmt.Sprintf("expected %s, found %s", want, p.tok.describe())}
}

// enter counts one level of nesting, failing past MaxDepth; leave undoes it.
func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return &SyntaxError{Offset: p.tok.at, Msg: fmt.Sprintf("nested deeper than %d levels", MaxDepth)}
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// operation reads an operation definition, or the query shorthand.
func (p *parser) operation() (*Operation, error) {
	op := &Operation{Type: "query"}
	if p.tok.kind == tokName {
		op.Type = p.tok.text
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind == tokName {
			op.Name = p.tok.text
			if err := p.advance(); err != nil {
				return nil, err
			}
		}
		if p.isPunct("(") {
			defaults, err := p.variables()
			if err != nil {
				return nil, err
			}
			op.Defaults = defaults
		}
		if err := p.directives(); err != nil {
			return nil, err
		}
	}
	sels, err := p.selectionSet()
	if err != nil {
		return nil, err
	}
	op.Selections = sels
	return op, nil
}

// variables reads "($name: Type = default @directive ...)" and returns
// the defaults.
func (p *parser) variables() (map[string]Value, error) {
	if err := p.advance(); err != nil { // "("
		return nil, err
	}
	defaults := map[string]Value{}
	for {
		if err := p.expect("$"); err != nil {
			return nil, err
		}
		name, err := p.name()
		if err != nil {
			return nil, err
		}
		if err := p.expect(":"); err != nil {
			return nil, err
		}
		if err := p.typeRef(); err != nil {
			return nil, err
		}
		if p.isPunct("=") {
			if err := p.advance(); err != nil {
				return nil, err
			}
			v, err := p.value(true)
			if err != nil {
				return nil, err
			}
			defaults[name] = v
		}
		if err := p.directives(); err != nil {
			return nil, err
		}
		if p.isPunct(")") {
			return defaults, p.advance()
		}
	}
}

// typeRef reads a type: Name, [Type], either followed by "!".
func (p *parser) typeRef() error {
	if p.isPunct("[") {
		if err := p.enter(); err != nil {
			return err
		}
		defer p.leave()
		if err := p.advance(); err != nil {
			return err
		}
		if err := p.typeRef(); err != nil {
			return err
		}
		if err := p.expect("]"); err != nil {
			return err
		}
	} else if _, err := p.name(); err != nil {
		return err
	}
	if p.isPunct("!") {
		return p.advance()
	}
	return nil
}

// fragment reads "fragment Name on Type @directives { ... }".
func (p *parser) fragment() (*Fragment, error) {
	if err := p.advance(); err != nil { // "fragment"
		return nil, err
	}
	if p.isName("on") {
		return nil, p.unexpected("a fragment name other than \"on\"")
	}
	name, err := p.name()
	if err != nil {
		return nil, err
	}
	if !p.isName("on") {
		return nil, p.unexpected(`"on"`)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if _, err := p.name(); err != nil {
		return nil, err
	}
	if err := p.directives(); err != nil {
		return nil, err
	}
	sels, err := p.selectionSet()
	if err != nil {
		return nil, err
	}
	return &Fragment{Name: name, Selections: sels}, nil
}

// selectionSet reads "{ selection ... }", at least one selection.
func (p *parser) selectionSet() ([]Selection, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	var out []Selection
	for {
		s, err := p.selection()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		if p.isPunct("}") {
			return out, p.advance()
		}
	}
}

// selection reads a field, a fragment spread or an inline fragment.
func (p *parser) selection() (Selection, error) {
	if p.isPunct("...") {
		if err := p.advance(); err != nil {
			return Selection{}, err
		}
		if p.tok.kind == tokName && p.tok.text != "on" {
			s := Selection{Spread: p.tok.text}
			if err := p.advance(); err != nil {
				return s, err
			}
			return s, p.directives()
		}
		s := Selection{Inline: true}
		if p.isName("on") {
			if err := p.advance(); err != nil {
				return s, err
			}
			if _, err := p.name(); err != nil {
				return s, err
			}
		}
		if err := p.directives(); err != nil {
			return s, err
		}
		sels, err := p.selectionSet()
		s.Selections = sels
		return s, err
	}
	var s Selection
	name, err := p.name()
	if err != nil {
		return s, err
	}
	s.Name = name
	if p.isPunct(":") {
		if err := p.advance(); err != nil {
			return s, err
		}
		if s.Name, err = p.name(); err != nil {
			return s, err
		}
		s.Alias = name
	}
	if p.isPunct("(") {
		if s.Arguments, err = p.arguments(false); err != nil {
			return s, err
		}
	}
	if err := p.directives(); err != nil {
		return s, err
	}
	if p.isPunct("{") {
		s.Selections, err = p.selectionSet()
	}
	return s, err
}

// arguments reads "(name: value ...)", at least one; const forbids
// variables, as in directives of variable definitions.
func (p *parser) arguments(constant bool) (map[string]Value, error) {
	if err := p.advance(); err != nil { // "("
		return nil, err
	}
	args := map[string]Value{}
	for {
		name, err := p.name()
		if err != nil {
			return nil, err
		}
		if err := p.expect(":"); err != nil {
			return nil, err
		}
		v, err := p.value(constant)
		if err != nil {
			return nil, err
		}
		args[name] = v
		if p.isPunct(")") {
			return args, p.advance()
		}
	}
}

// directives reads any "@name(arguments)".
func (p *parser) directives() error {
	for p.isPunct("@") {
		if err := p.advance(); err != nil {
			return err
		}
		if _, err := p.name(); err != nil {
			return err
		}
		if p.isPunct("(") {
			if _, err := p.arguments(false); err != nil {
				return err
			}
		}
	}
	return nil
}

// value reads a value; constant forbids variables.
func (p *parser) value(constant bool) (Value, error) {
	t := p.tok
	switch {
	case t.kind == tokPunct && t.text == "$":
		if constant {
			return Value{}, &SyntaxError{Offset: t.at, Msg: "a default value may not be a variable"}
		}
		if err := p.advance(); err != nil {
			return Value{}, err
		}
		name, err := p.name()
		return Value{Kind: Variable, Text: name}, err
	case t.kind == tokPunct && (t.text == "[" || t.text == "{"):
		return p.compound(constant)
	case t.kind == tokInt:
		return Value{Kind: Int, Text: t.text}, p.advance()
	case t.kind == tokFloat:
		return Value{Kind: Float, Text: t.text}, p.advance()
	case t.kind == tokString:
		return Value{Kind: String, Text: t.text}, p.advance()
	case t.kind == tokName:
		v := Value{Kind: Enum, Text: t.text}
		switch t.text {
		case "true", "false":
			v.Kind = Boolean
		case "null":
			v.Kind = Null
		}
		return v, p.advance()
	}
	return Value{}, p.unexpected("a value")
}

// compound reads a list "[value ...]" or an object "{name: value ...}".
func (p *parser) compound(constant bool) (Value, error) {
	if err := p.enter(); err != nil {
		return Value{}, err
	}
	defer p.leave()
	list := p.isPunct("[")
	closing, kind := "}", Object
	if list {
		closing, kind = "]", List
	}
	if err := p.advance(); err != nil {
		return Value{}, err
	}
	for !p.isPunct(closing) {
		if !list {
			if _, err := p.name(); err != nil {
				return Value{}, err
			}
			if err := p.expect(":"); err != nil {
				return Value{}, err
			}
		}
		if _, err := p.value(constant); err != nil {
			return Value{}, err
		}
	}
	return Value{Kind: kind}, p.advance()
}
