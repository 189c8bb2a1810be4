// Package fleet holds the proof of issue 17: three real etcd 3.6 members
// and three edgelb daemons (nftables dataplane), each in its own network
// namespace on one bridge, sharing their state through etcd. Everything
// lives in files tagged fleet (make test-fleet); see README.md.
package fleet
