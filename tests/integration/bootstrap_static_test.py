"""Issue 2: 3 and then 5 nodes started at the same time (random delays up to 3 s), each
`quorate init --initial-cluster ...` then real etcd: one cluster, every member started, IDs as
`quorate discover` predicted."""
from harness import Cluster, check, log, main, require, wait_until


def bootstrap(size):
    c = Cluster(size)
    predicted = c.discover()
    check(len(predicted["members"]) == size, f"discover listed {predicted}")
    decisions = {}

    def start(node, delay):
        decisions[node.name] = node.init_and_start(delay)["decision"]
    c.start_all(start)
    log(f"{size} nodes decided {decisions}")
    check(set(decisions.values()) <= {"new", "late-initial"}, f"unexpected decisions {decisions}")
    try:
        wait_until(lambda: c.all_started(), 60, f"all {size} members started")
        c.check_prediction(predicted)
    except AssertionError:
        c.dump_logs()
        raise
    c.stop_all()


def test():
    require("etcd")
    require("etcdctl")
    bootstrap(3)
    bootstrap(5)


if __name__ == "__main__":
    main(test)
