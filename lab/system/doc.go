// Package system runs edgelb the way operators do (issue 38): Debian 12
// booted with systemd as PID 1 in systemd-nspawn containers inside network
// namespaces the tests create, the .deb of this commit installed with dpkg,
// the unmodified unit started by systemd. Its tests carry the build tag
// system and run in `make test-system`.
package system
