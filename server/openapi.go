package server

import (
	_ "embed"
	"net/http"
)

//go:embed openapi.json
var openapiJSON []byte

// OpenAPI returns the OpenAPI 3 document of the API.
func OpenAPI() []byte { return openapiJSON }

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openapiJSON)
	return err
}
