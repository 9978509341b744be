"""Issue 2: nodes started at the same time discover each other through a real DNS server (dnsmasq
serving SRV and A records in a network namespace of the test's own, which etcd resolves through
too): one cluster, every member started, IDs as `quorate discover` predicted. Both etcd's flag
(--discovery-srv) and quorate's spec (provider=dns-srv) are exercised."""
from harness import Cluster, Dns, Netns, check, main, require


def bootstrap(netns, size, discovery):
    c = Cluster(size, prefix=netns.prefix, dns_names=True)
    c.discovery = discovery + ["--cluster-size", str(size)]
    dns = Dns(netns, c.dir)
    dns.records(Dns.srv_records(c.nodes))
    predicted = c.discover()
    check([m["name"] for m in predicted["members"]] == [n.name for n in c.nodes], f"discover: {predicted}")
    check(all(m["peerURLs"] == [f"http://{m['name']}.quorate.test:2380"] for m in predicted["members"]),
          f"peer URLs from SRV targets: {predicted}")
    c.bootstrap(predicted, f"dns-srv via {discovery[0]}")
    dns.stop()


def test():
    require("etcd")
    require("etcdctl")
    netns = Netns()
    bootstrap(netns, 3, ["--discovery-srv", "quorate.test"])
    bootstrap(netns, 5, ["--discovery", "provider=dns-srv domain=quorate.test"])


if __name__ == "__main__":
    main(test)
