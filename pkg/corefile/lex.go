package corefile

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// token is one word of a Corefile and where it starts: the file, the
// line, and which pass over a text it came from (src), so that words of
// two imports of one snippet are never taken for one line.
type token struct {
	text   string
	line   int
	quoted bool // a "quoted" word: never a brace
	file   string
	src    int
}

// sameLine reports whether a and b start on the same line of the same
// text.
func sameLine(a, b token) bool { return a.src == b.src && a.line == b.line }

// SyntaxError is a Corefile that cannot be read, with where.
type SyntaxError struct {
	File string
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// lex splits src into tokens, each marked with file and srcID. Comments
// are dropped; quotes are removed.
func lex(file, src string, srcID int) ([]token, error) {
	var out []token
	var cur strings.Builder
	line, start := 1, 1
	inWord, inQuote, quoted := false, false, false
	flush := func() {
		if inWord {
			out = append(out, token{text: cur.String(), line: start, quoted: quoted, file: file, src: srcID})
			cur.Reset()
			inWord, quoted = false, false
		}
	}
	if err := checkText(file, src); err != nil {
		return nil, err
	}
	rs := []rune(src)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		if inQuote {
			switch {
			case r == '\\' && i+1 < len(rs) && (rs[i+1] == '"' || rs[i+1] == '\\'):
				i++
				cur.WriteRune(rs[i])
			case r == '"':
				inQuote = false
			default:
				if r == '\n' {
					line++
				}
				cur.WriteRune(r)
			}
			continue
		}
		switch {
		case r == '\n':
			flush()
			line++
		case unicode.IsSpace(r):
			flush()
		case r == '#' && !inWord:
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
			i-- // the newline is handled by the loop
		case r == '"':
			if !inWord {
				inWord, start = true, line
			}
			inQuote, quoted = true, true
		default:
			if !inWord {
				inWord, start = true, line
			}
			cur.WriteRune(r)
		}
	}
	if inQuote {
		return nil, &SyntaxError{File: file, Line: start, Msg: "unterminated quoted string"}
	}
	flush()
	return out, nil
}

// checkText refuses text that is not UTF-8 or holds control characters
// other than tab and line ends: no Corefile has them, and they would end
// up in the config written from it.
func checkText(file, src string) error {
	line := 1
	for i, r := range src {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(src[i:], "\uFFFD"):
			return &SyntaxError{File: file, Line: line, Msg: "the text is not UTF-8"}
		case r == '\n':
			line++
		case r != '\t' && r != '\r' && unicode.IsControl(r):
			return &SyntaxError{File: file, Line: line, Msg: fmt.Sprintf("control character %U", r)}
		}
	}
	return nil
}
