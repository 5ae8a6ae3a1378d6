package server

import (
	"encoding/json"

	"github.com/drover-dev/drover/driver"
)

// The limits on input both drivers store alike live in package driver, so the
// library and the HTTP API refuse the same things; these name them locally.
const maxInt32 = driver.MaxInt32

func checkText(field, s string) error                   { return driver.CheckText(field, s) }
func cleanText(s string) string                         { return driver.CleanText(s) }
func checkJSON(field string, raw json.RawMessage) error { return driver.CheckJSON(field, raw) }
