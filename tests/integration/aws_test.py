"""Issue 11, the `aws` provider against moto's EC2 and Auto Scaling (moto_server on 127.0.0.1), in a
network namespace of the test's own. moto's instances take their addresses from a 127.0.0.0/24
subnet, so every address quorate talks to is loopback.
- an Auto Scaling group of 3 bootstraps 3 real etcd nodes with `quorate run --discovery
  'provider=aws asg=etcd ...'` and no --cluster-size: the size is the group's DesiredCapacity;
- instance churn (DESIGN §4 rule 9): one instance is killed and terminated, the group launches a
  replacement (new ID, new address, empty disk); its quorate removes the departed member and joins
  as a learner, and the cluster ends with 3 healthy voters, the departed one gone;
- a web identity (AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, as EKS sets them) is exchanged at
  moto's STS for the credentials;
- a misspelt key and a missing region are bad input (exit 2), and the secret key shows in no
  output or log."""
import os

from harness import (QUORATE, Cluster, check, log, main, require, run, skip, start_moto, started_voters, wait_healthy,
                     wait_until)


def test():
    require("etcd")
    require("etcdctl")
    try:
        import boto3
    except ImportError:
        skip("boto3 is not installed")
    c = Cluster(3)
    endpoint = start_moto(c)
    os.environ.update(AWS_ACCESS_KEY_ID="AKIDQUORATE", AWS_SECRET_ACCESS_KEY="quorate-secret")
    aws = dict(endpoint_url=endpoint, region_name="us-east-1")
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
                if i["State"]["Name"] == "running":
                    out[i["InstanceId"]] = i["PrivateIpAddress"]
        return out

    def be_instance(node, instance_id, ip):
        check(ip.startswith("127.0.0."), f"moto gave {instance_id} the address {ip}, not a loopback one")
        node.name, node.ip, node.host = instance_id, ip, ip

    instances = running_instances()
    check(len(instances) == 3, f"the group launched {instances}")
    for node, (instance_id, ip) in zip(c.nodes, sorted(instances.items(), key=lambda kv: kv[1])):
        be_instance(node, instance_id, ip)
    spec = f"provider=aws asg=etcd region=us-east-1 endpoint={endpoint}"
    c.discovery = ["--discovery", spec]

    # Bad input: exit 2, one line, nothing written.
    r = run([QUORATE, "discover", "--discovery", spec + " tag_kye=x"], check_rc=2)
    check("tag_kye" in r.stderr, f"a misspelt key is not named: {r.stderr}")
    r = run([QUORATE, "discover", "--discovery", f"provider=aws asg=etcd endpoint={endpoint}"], check_rc=2,
            env=dict(os.environ, AWS_REGION="", AWS_DEFAULT_REGION=""))
    check("region" in r.stderr, f"a missing region is not named: {r.stderr}")
    # The group bootstraps at once, its size from DesiredCapacity.
    r = run([QUORATE, "discover", "-w", "json", "--discovery", spec], check_rc=0)
    for node in c.nodes:
        check(node.name in r.stdout and node.peer_url in r.stdout, f"discover does not list {node.name}: {r.stdout}")
    check("quorate-secret" not in r.stdout + r.stderr, "the secret key shows in discover's output")
    # A pod's web identity (EKS's IRSA): the token exchanged at STS for credentials, no keys given.
    token_file = os.path.join(c.dir, "web-identity-token")
    with open(token_file, "w") as f:
        f.write("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZXRjZDpldGNkIn0.c2ln\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ACCESS") and not k.startswith("AWS_SECRET")}
    env.update(AWS_WEB_IDENTITY_TOKEN_FILE=token_file, AWS_ROLE_ARN="arn:aws:iam::123456789012:role/etcd")
    r = run([QUORATE, "discover", "-w", "json", "--discovery", spec], check_rc=0, env=env)
    check(all(n.name in r.stdout for n in c.nodes), f"discover with a web identity does not list the group: {r.stdout}")
    for node in c.nodes:
        node.run()
    wait_healthy(c)
    log(f"the Auto Scaling group of 3 bootstrapped: {sorted(n.name for n in c.nodes)}")

    # Churn: an instance dies; the group launches another (new ID, new address, empty disk).
    victim = c.nodes[0]
    victim.kill()
    autoscaling.terminate_instance_in_auto_scaling_group(InstanceId=victim.name, ShouldDecrementDesiredCapacity=False)
    now = running_instances()
    new_ids = [i for i in now if i not in instances]
    check(len(new_ids) == 1 and len(now) == 3, f"the group did not replace {victim.name}: {now}")
    newcomer = c.add_node()
    be_instance(newcomer, new_ids[0], now[new_ids[0]])
    c.nodes.remove(victim)
    newcomer.run()
    wait_until(lambda: started_voters(c, 3) and newcomer.name in str(c.member_list()), 90,
               f"{newcomer.name} to take {victim.name}'s seat")
    wait_healthy(c)
    names = sorted(m["name"] for m in c.member_list()["members"])
    check(victim.name not in names, f"the departed {victim.name} keeps its seat: {names}")
    with open(newcomer.log_path, errors="replace") as f:
        text = f.read()
    check("its instance has departed" in text, "the newcomer's log does not say the instance departed")
    check("quorate-secret" not in text, "the secret key shows in the log")
    log(f"{newcomer.name} ({newcomer.ip}) took the seat of departed {victim.name}: members {names}")


if __name__ == "__main__":
    main(test)
