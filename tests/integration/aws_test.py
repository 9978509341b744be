"""Issue 11, the `aws` provider against moto's EC2 and Auto Scaling (moto_server on 127.0.0.1), in a
network namespace of the test's own. moto's instances take their addresses from a 127.0.0.0/24
subnet, so every address quorate talks to is loopback. Each node has an IMDSv2 of its own
(tests/integration/imds.py) that knows its instance ID and region, refuses a GET without a session
token and rotates the instance role's credentials.
- an Auto Scaling group of 3 bootstraps 3 real etcd nodes with `quorate run --discovery
  'provider=aws asg=auto ...'`: no region, no group name, no keys and no --cluster-size; the region
  and the instance ID come from IMDS, the group from DescribeAutoScalingInstances, the size from its
  DesiredCapacity, and the credentials from the instance role; the IDs are those `discover` predicts;
- DescribeInstances is read page by page (page_size=5, more instances than a page);
- instance churn (DESIGN §4 rule 9): one instance is killed and terminated, the group launches a
  replacement (new ID, new address, empty disk); its quorate removes the departed member and joins
  as a learner, and the cluster ends with 3 healthy voters, the departed one gone, no key lost;
- a web identity (AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, as EKS sets them) is exchanged at
  moto's STS for the credentials;
- the README's unit: the nodes run with `--backup-to s3://...` (moto's S3) and no AWS_* keys, so the
  store signs with the same instance role as discovery; the leader's scheduled backup lands in the
  bucket (the store read the environment only, and every node exited 2 with "no credentials");
- a misspelt key is bad input (exit 2), no region anywhere is a runtime failure naming it (exit 1),
  and no secret shows in any output or log."""
import json
import os
import re
import urllib.error
import urllib.request

from harness import (QUORATE, Cluster, check, free_port, keys_caught_up, log, main, require, run, skip, start_moto,
                     started_voters, wait_healthy, wait_until)
from imds import Imds


def test():
    require("etcd")
    require("etcdctl")
    try:
        import boto3
    except ImportError:
        skip("boto3 is not installed")
    c = Cluster(3)
    endpoint = start_moto(c)
    static_keys = dict(AWS_ACCESS_KEY_ID="AKIDQUORATE", AWS_SECRET_ACCESS_KEY="quorate-secret")
    aws = dict(endpoint_url=endpoint, region_name="us-east-1",
               aws_access_key_id="AKIDTEST", aws_secret_access_key="test-secret")
    ec2 = boto3.client("ec2", **aws)
    autoscaling = boto3.client("autoscaling", **aws)
    vpc = ec2.create_vpc(CidrBlock="127.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="127.0.0.0/24")["Subnet"]["SubnetId"]
    ec2.create_launch_template(LaunchTemplateName="etcd",
                               LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "t3.micro"})
    autoscaling.create_auto_scaling_group(AutoScalingGroupName="etcd", LaunchTemplate={"LaunchTemplateName": "etcd"},
                                          MinSize=0, MaxSize=5, DesiredCapacity=3, VPCZoneIdentifier=subnet)

    def running_instances():
        out = {}
        for reservation in ec2.describe_instances()["Reservations"]:
            for i in reservation["Instances"]:
                if i["State"]["Name"] == "running" and any(t["Key"] == "aws:autoscaling:groupName"
                                                           for t in i.get("Tags", [])):
                    out[i["InstanceId"]] = i["PrivateIpAddress"]
        return out

    # Without keys: each node's credentials are its instance role's, from its own IMDS.
    role_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    imds_of = {}

    def be_instance(node, instance_id, ip):
        check(ip.startswith("127.0.0."), f"moto gave {instance_id} the address {ip}, not a loopback one")
        node.name, node.ip, node.host = instance_id, ip, ip
        imds_of[node.name] = Imds(instance_id)
        node.env = dict(role_env, AWS_EC2_METADATA_SERVICE_ENDPOINT=imds_of[node.name].endpoint)

    instances = running_instances()
    check(len(instances) == 3, f"the group launched {instances}")
    for node, (instance_id, ip) in zip(c.nodes, sorted(instances.items(), key=lambda kv: kv[1])):
        be_instance(node, instance_id, ip)
    spec = f"provider=aws asg=auto endpoint={endpoint}"
    c.discovery = ["--discovery", spec]
    first = c.nodes[0]

    # IMDSv2 refuses what does not carry a session token.
    try:
        urllib.request.urlopen(imds_of[first.name].endpoint + "/latest/meta-data/instance-id", timeout=5)
        check(False, "the test's IMDS answered a GET without a session token")
    except urllib.error.HTTPError as e:
        check(e.code == 401, f"the test's IMDS refused a tokenless GET with {e.code}")
    imds_of[first.name].refused = 0

    # Bad input: exit 2, one line, nothing written. No region anywhere: exit 1 naming it.
    r = run([QUORATE, "discover", "--discovery", spec + " tag_kye=x"], check_rc=2, env=first.env)
    check("tag_kye" in r.stderr, f"a misspelt key is not named: {r.stderr}")
    closed = f"http://127.0.0.1:{free_port()}"
    r = run([QUORATE, "discover", "--discovery", f"provider=aws asg=etcd endpoint={endpoint}"], check_rc=1,
            env=dict(role_env, AWS_EC2_METADATA_SERVICE_ENDPOINT=closed))
    check("region" in r.stderr and r.stderr.count("\n") == 1, f"a region found nowhere is not named: {r.stderr}")

    # What the group says, from one instance: its members, the size and where the size came from.
    r = run([QUORATE, "discover", "-w", "json", "--initial-cluster-token", c.token, "--discovery", spec],
            check_rc=0, env=first.env)
    predicted = json.loads(r.stdout)
    check(sorted(m["name"] for m in predicted["members"]) == sorted(n.name for n in c.nodes),
          f"discover does not list the group: {r.stdout}")
    check(predicted["clusterSize"] == 3 and "Auto Scaling group etcd in us-east-1" in predicted["clusterSizeFrom"],
          f"discover does not take the size from the group: {r.stdout}")
    r = run([QUORATE, "discover", "-w", "table", "--discovery", spec], check_rc=0, env=first.env)
    check("cluster size 3, from aws Auto Scaling group etcd in us-east-1" in r.stdout,
          f"the table does not say where the size came from: {r.stdout}")

    # The group's own view: an instance it put in Standby is not a member, whatever EC2 says of it.
    autoscaling.create_auto_scaling_group(AutoScalingGroupName="standby", LaunchTemplate={"LaunchTemplateName": "etcd"},
                                          MinSize=0, MaxSize=3, DesiredCapacity=2, VPCZoneIdentifier=subnet)
    standby_ids = [i["InstanceId"] for i in autoscaling.describe_auto_scaling_groups(
        AutoScalingGroupNames=["standby"])["AutoScalingGroups"][0]["Instances"]]
    autoscaling.enter_standby(InstanceIds=standby_ids[:1], AutoScalingGroupName="standby",
                              ShouldDecrementDesiredCapacity=True)
    r = run([QUORATE, "discover", "-w", "json", "--discovery",
             f"provider=aws asg=standby region=us-east-1 endpoint={endpoint}"], check_rc=0, env=dict(role_env, **static_keys))
    listed = [m["name"] for m in json.loads(r.stdout)["members"]]
    check(listed == standby_ids[1:], f"the group's Standby instance {standby_ids[0]} is listed: {listed}")
    autoscaling.delete_auto_scaling_group(AutoScalingGroupName="standby", ForceDelete=True)
    ec2.terminate_instances(InstanceIds=standby_ids)

    # Paging: more tagged instances than a DescribeInstances page holds (page_size=5). They are
    # never started: their addresses are only listed.
    # One launch each: moto fills a page with reservations.
    extra = [ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, SubnetId=subnet,
                               TagSpecifications=[{"ResourceType": "instance",
                                                   "Tags": [{"Key": "paging", "Value": "yes"}]}])["Instances"][0]
             for _ in range(8)]
    r = run([QUORATE, "discover", "-w", "json", "--discovery",
             f"provider=aws tag_key=paging tag_value=yes page_size=5 region=us-east-1 endpoint={endpoint}"],
            check_rc=0, env=dict(role_env, **static_keys))
    listed = sorted(m["name"] for m in json.loads(r.stdout)["members"])
    check(listed == sorted(i["InstanceId"] for i in extra), f"paged discover listed {listed}")
    with open(os.path.join(c.dir, "moto.log"), errors="replace") as f:
        check(re.search(r"GET /\?[^ ]*NextToken=", f.read()), "DescribeInstances was never asked for a second page")
    ec2.terminate_instances(InstanceIds=[i["InstanceId"] for i in extra])

    # A pod's web identity (EKS's IRSA): the token exchanged at STS for credentials, no keys given.
    token_file = os.path.join(c.dir, "web-identity-token")
    with open(token_file, "w") as f:
        f.write("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZXRjZDpldGNkIn0.c2ln\n")
    env = dict(role_env, AWS_WEB_IDENTITY_TOKEN_FILE=token_file, AWS_ROLE_ARN="arn:aws:iam::123456789012:role/etcd",
               AWS_REGION="us-east-1")
    r = run([QUORATE, "discover", "-w", "json", "--discovery", f"provider=aws asg=etcd endpoint={endpoint}"],
            check_rc=0, env=env)
    check(all(n.name in r.stdout for n in c.nodes), f"discover with a web identity does not list the group: {r.stdout}")

    # The group bootstraps at once, every node asking its own IMDS, for discovery and for the backups.
    boto3.client("s3", **aws).create_bucket(Bucket="etcd-backups")
    backups = ["--backup-to", f"s3://etcd-backups/prod?endpoint={endpoint}", "--backup-schedule", "2s"]
    for node in c.nodes:
        node.run(backups)
    wait_healthy(c)
    s3 = boto3.client("s3", **aws)
    wait_until(lambda: s3.list_objects_v2(Bucket="etcd-backups", Prefix="prod/").get("KeyCount", 0) > 0, 60,
               "a scheduled backup signed with the instance role in s3://etcd-backups/prod")
    c.check_prediction(predicted)
    c.etcdctl("put", "/before-churn", "kept")
    for node in c.nodes:
        imds = imds_of[node.name]
        check(imds.credential_sets and imds.refused == 0,
              f"{node.name}'s quorate fetched {imds.credential_sets} from its IMDS, {imds.refused} GETs without a token")
    log(f"the Auto Scaling group of 3 bootstrapped: {sorted(n.name for n in c.nodes)}")

    # Churn: an instance dies; the group launches another (new ID, new address, empty disk).
    victim = c.nodes[0]
    victim.kill()
    victim.wipe()
    autoscaling.terminate_instance_in_auto_scaling_group(InstanceId=victim.name, ShouldDecrementDesiredCapacity=False)
    now = running_instances()
    new_ids = [i for i in now if i not in instances]
    check(len(new_ids) == 1 and len(now) == 3, f"the group did not replace {victim.name}: {now}")
    newcomer = c.add_node()
    be_instance(newcomer, new_ids[0], now[new_ids[0]])
    c.nodes.remove(victim)
    newcomer.run(backups)
    wait_until(lambda: started_voters(c, 3) and newcomer.name in str(c.member_list()), 90,
               f"{newcomer.name} to take {victim.name}'s seat")
    wait_healthy(c)
    names = sorted(m["name"] for m in c.member_list()["members"])
    check(victim.name not in names, f"the departed {victim.name} keeps its seat: {names}")
    kept = keys_caught_up(c, newcomer, "/", lambda k: k.get("/before-churn") == "kept")
    check(kept.get("/before-churn") == "kept", "the newcomer's copy lacks the key written before")
    with open(newcomer.log_path, errors="replace") as f:
        text = f.read()
    check("its instance has departed" in text, "the newcomer's log does not say the instance departed")
    for node in c.nodes + [victim]:
        with open(node.log_path, errors="replace") as f:
            text = f.read()
        for secret in ["quorate-secret", "test-secret"]:
            check(secret not in text, f"a secret key shows in {node.name}'s log")
    log(f"{newcomer.name} ({newcomer.ip}) took the seat of departed {victim.name}: members {names}")


if __name__ == "__main__":
    main(test)
