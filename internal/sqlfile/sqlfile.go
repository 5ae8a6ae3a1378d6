// Package sqlfile loads named queries from embedded .sql files, so runtime SQL
// lives in SQL files rather than Go strings. A query starts at a line
// "-- name: QueryName" and runs to the next such line or the end of the file.
package sqlfile

import (
	"fmt"
	"io/fs"
	"strings"
)

// Queries maps query names to SQL text.
type Queries map[string]string

// Load parses every *.sql file of fsys matching pattern.
func Load(fsys fs.FS, pattern string) (Queries, error) {
	files, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	q := Queries{}
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		if err := q.parse(f, string(b)); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// MustLoad is Load for package initialisation of embedded files.
func MustLoad(fsys fs.FS, pattern string) Queries {
	q, err := Load(fsys, pattern)
	if err != nil {
		panic(err)
	}
	return q
}

func (q Queries) parse(file, text string) error {
	var name string
	var body strings.Builder
	flush := func() error {
		if name == "" {
			return nil
		}
		if _, dup := q[name]; dup {
			return fmt.Errorf("%s: query %q defined twice", file, name)
		}
		q[name] = strings.TrimSpace(body.String())
		body.Reset()
		return nil
	}
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "-- name:"); ok {
			if err := flush(); err != nil {
				return err
			}
			name = strings.TrimSpace(rest)
			continue
		}
		if name != "" {
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	return flush()
}

// Get returns the named query; it panics on an unknown name, which is a programming
// error caught by any test that runs the query.
func (q Queries) Get(name string) string {
	s, ok := q[name]
	if !ok {
		panic("sqlfile: unknown query " + name)
	}
	return s
}
