//go:build tools

// Package promqlbuild pins promtool (rule checks and rule unit tests) and the selector lister the
// live-metrics test uses to read dashboard and alert PromQL (hack/promql.py).
package promqlbuild

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
