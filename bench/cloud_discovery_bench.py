"""Cloud discovery latency (issue 11): `quorate discover` against an emulated group of 1,000
instances, read page by page, against the same for a group of 3, in the same run; and each against
the AWS SDK's own way of reading the same list (boto3's DescribeInstances paginator), so the figures
are ratios, not milliseconds of one machine.

The emulator is moto_server (EC2) on 127.0.0.1; its instances' addresses are in 127.0.0.0/16 and
nothing connects to them. moto fills a page with reservations, so every instance is launched on its
own, as an Auto Scaling group launches them.
    python3 bench/cloud_discovery_bench.py [--runs 7] [--out bench/results/cloud_discovery.json]
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_moto(log_dir):
    moto = shutil.which("moto_server")
    if moto is None:
        sys.exit("moto_server is not installed")
    port = free_port()
    log = open(os.path.join(log_dir, "moto.log"), "w")
    proc = subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    sys.exit("moto_server did not listen")


def median_seconds(fn, runs):
    times = []
    for _ in range(runs):
        start = time.monotonic()
        fn()
        times.append(time.monotonic() - start)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quorate", default=os.path.join(HERE, "..", "build", "quorate"))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "cloud_discovery.json"))
    args = ap.parse_args()
    import boto3

    work = tempfile.mkdtemp(prefix="quorate-cloud-bench-")
    moto, endpoint = start_moto(work)
    try:
        keys = dict(aws_access_key_id="AKIDBENCH", aws_secret_access_key="bench-secret")
        ec2 = boto3.client("ec2", endpoint_url=endpoint, region_name="us-east-1", **keys)
        vpc = ec2.create_vpc(CidrBlock="127.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="127.0.0.0/20")["Subnet"]["SubnetId"]
        env = dict(os.environ, AWS_ACCESS_KEY_ID=keys["aws_access_key_id"],
                   AWS_SECRET_ACCESS_KEY=keys["aws_secret_access_key"], AWS_REGION="us-east-1")
        results = []
        for size in (3, 1000):
            group = f"g{size}"
            for _ in range(size):
                ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, SubnetId=subnet,
                                  TagSpecifications=[{"ResourceType": "instance",
                                                      "Tags": [{"Key": "group", "Value": group}]}])
            for page_size in (1000, 100):
                if size == 3 and page_size == 100:
                    continue
                spec = f"provider=aws tag_key=group tag_value={group} page_size={page_size} endpoint={endpoint}"

                def quorate():
                    r = subprocess.run([args.quorate, "discover", "-w", "json", "--discovery", spec], env=env,
                                       capture_output=True, text=True)
                    if r.returncode != 0 or len(json.loads(r.stdout)["members"]) != size:
                        sys.exit(f"quorate discover failed: {r.stderr}")

                def sdk():
                    pages = ec2.get_paginator("describe_instances").paginate(
                        Filters=[{"Name": f"tag:group", "Values": [group]},
                                 {"Name": "instance-state-name", "Values": ["pending", "running"]}],
                        PaginationConfig={"PageSize": page_size})
                    found = sum(len(r["Instances"]) for p in pages for r in p["Reservations"])
                    if found != size:
                        sys.exit(f"boto3 found {found} of {size}")

                quorate()  # warm: moto's first answer for a filter is slower
                results.append({"instances": size, "page_size": page_size, "pages": -(-size // page_size),
                                "quorate_s": median_seconds(quorate, args.runs),
                                "boto3_s": median_seconds(sdk, args.runs)})
                print(json.dumps(results[-1]), flush=True)
        base = results[0]["quorate_s"]
        for r in results:
            r["vs_3_instances"] = round(r["quorate_s"] / base, 2)
            r["vs_boto3"] = round(r["quorate_s"] / r["boto3_s"], 2)
        with open(args.out, "w") as f:
            json.dump({"runs": args.runs, "load": os.getloadavg()[0], "results": results}, f, indent=2)
        print(f"{'instances':>9} {'pages':>5} {'quorate discover':>17} {'vs 3 instances':>15} {'boto3':>8} "
              f"{'vs boto3':>9}")
        for r in results:
            print(f"{r['instances']:>9} {r['pages']:>5} {r['quorate_s']:>16.3f}s {r['vs_3_instances']:>14.2f}x "
                  f"{r['boto3_s']:>7.3f}s {r['vs_boto3']:>8.2f}x")
    finally:
        moto.terminate()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
