// Package topology starts onsale's highly available topology on loopback,
// from Debian's engines and the binaries in bin/: etcd and three PostgreSQL
// members under Patroni (synchronous replication), a Redis Cluster of three
// masters and three replicas, HAProxy in front of the gateways and the
// cores, the gateways, the cores and the payment simulator. `make
// cluster-up` (cmd/cluster), the failover tests and the fault sale start it
// only through this package, from the configuration files an operator uses
// (deploy/ha/), and use its handles to inject faults: kill -9 of the
// PostgreSQL primary or a Redis master, of a core or a gateway, SIGSTOP and
// SIGCONT.
package topology
