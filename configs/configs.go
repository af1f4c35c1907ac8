// Package configs holds the shipped configuration files, one per binary,
// each listing every knob with its default. They are embedded so that
// `danmaku config init` can write copies with a deployment's own secrets.
package configs

import "embed"

// Files holds logic.yaml, job.yaml, comet.yaml, archive.yaml and danmaku.yaml.
//
//go:embed *.yaml
var Files embed.FS
