// pulumi-resource-kubernetes for the live tier. The upstream main embeds schema-embed.json, which its
// release build generates from schema.json (the same document with "version" set) and which the Go
// module does not ship; live/toolchain.py stages this module in its cache with schema.json and
// terraform-mapping.json copied from the downloaded provider module, then builds it there, and the version is set here the way the generator sets it.
package main

import (
	_ "embed"
	"encoding/json"
	"log"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema.json
var schema []byte

//go:embed terraform-mapping.json
var terraformMapping []byte

func main() {
	var spec map[string]any
	if err := json.Unmarshal(schema, &spec); err != nil {
		log.Fatalf("schema.json: %v", err)
	}
	spec["version"] = version.Version
	versioned, err := json.Marshal(spec)
	if err != nil {
		log.Fatalf("schema.json: %v", err)
	}
	provider.Serve("kubernetes", version.Version, versioned, terraformMapping)
}
