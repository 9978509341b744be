"""Issue 2: 3 and then 5 nodes started at the same time (random delays up to 3 s), each
`quorate init --initial-cluster ...` then real etcd: one cluster, every member started, IDs as
`quorate discover` predicted."""
from harness import Cluster, check, main, require


def test():
    require("etcd")
    require("etcdctl")
    for size in (3, 5):
        c = Cluster(size)
        predicted = c.discover()
        check(len(predicted["members"]) == size, f"discover listed {predicted}")
        c.bootstrap(predicted, "static")


if __name__ == "__main__":
    main(test)
