//go:build tools

// Pins the release of Slinky's slurm-operator that bench/run scale --operator slinky measures
// beside Tightrope's (scripts/testbed build --tool slinky); nothing here is compiled.
package tools

import (
	_ "github.com/SlinkyProject/slurm-operator/cmd/manager"
)
