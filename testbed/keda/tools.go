//go:build tools

// Pins the KEDA release the test bed builds (scripts/testbed build keda); nothing here is compiled.
package tools

import (
	_ "github.com/kedacore/keda/v2/cmd/adapter"
	_ "github.com/kedacore/keda/v2/cmd/operator"
)
