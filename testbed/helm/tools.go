//go:build tools

// Pins the Helm release the test bed builds (scripts/testbed build); nothing here is compiled.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
