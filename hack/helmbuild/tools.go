//go:build tools

// Package helmbuild pins the Helm CLI used to render and lint charts/karpy (make helm).
package helmbuild

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
