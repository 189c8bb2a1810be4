// Package faults holds edgelb's fault and load proofs (issue 7): the real
// daemon binary in the demo lab's gateway namespace is killed, tampered
// with, reloaded and loaded, and the kernel's nftables state is compared
// with what the config says. Everything lives in tagged test files (netns,
// k8s); this file only names the package. See README.md.
package faults
