//go:build !unix

package bundle_test

import "time"

// processCPU is not measured here: the benchmarks then report no CPU
// figure.
func processCPU() time.Duration { return 0 }
