package api

// OpenAPIYAML renders the API's OpenAPI 3.1 document, as checked in at
// openapi.yaml.
func OpenAPIYAML() ([]byte, error) {
	return New(Deps{}).API.OpenAPI().YAML()
}
