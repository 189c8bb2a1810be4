//go:build netns || k8s || failover

package faults

import (
	"testing"

	"github.com/edgelb/edgelb/lab/edgelbbin"
)

// edgelbBinary is the daemon under test, built once per test binary.
var edgelbBinary = edgelbbin.Path

func TestMain(m *testing.M) { edgelbbin.Main(m) }
