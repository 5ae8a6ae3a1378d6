package sqlfile

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"q/a.sql": {Data: []byte("-- header comment, not a query\n-- name: One\nSELECT 1;\n\n-- name: Two\nSELECT\n  2;\n")},
		"q/b.sql": {Data: []byte("-- name: Three\nSELECT 3;")},
	}
	q, err := Load(fsys, "q/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"One": "SELECT 1;", "Two": "SELECT\n  2;", "Three": "SELECT 3;"}
	if len(q) != len(want) {
		t.Fatalf("got %d queries %v, want %d", len(q), q, len(want))
	}
	for name, sql := range want {
		if got := q.Get(name); got != sql {
			t.Errorf("query %s = %q, want %q", name, got, sql)
		}
	}
}

func TestLoadDuplicate(t *testing.T) {
	fsys := fstest.MapFS{"a.sql": {Data: []byte("-- name: X\nSELECT 1;\n-- name: X\nSELECT 2;\n")}}
	if _, err := Load(fsys, "*.sql"); err == nil || !strings.Contains(err.Error(), `"X" defined twice`) {
		t.Fatalf("Load with a duplicate name: err = %v, want defined twice", err)
	}
}

func TestGetUnknownPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("Get of an unknown query did not panic")
		}
	}()
	Queries{}.Get("missing")
}
