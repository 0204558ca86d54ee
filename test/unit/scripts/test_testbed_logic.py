"""The parts of scripts/testbed that need no root, no network and no bed."""
import base64
import hashlib
import hmac
import json
import re
import shlex
import socket

import pytest


def test_a_complete_tree_verifies(testbed, tmp_path):
    top = tmp_path / "tool"
    (top / "bin").mkdir(parents=True)
    (top / "bin/kubectl").write_bytes(b"\x7fELF" + b"x" * 1000)
    testbed.write_manifest(top, ["bin/kubectl"], {"version": "v1"})
    assert testbed.manifest_problems(top) == []


def test_a_truncated_binary_is_reported_as_truncated(testbed, tmp_path):
    top = tmp_path / "tool"
    (top / "bin").mkdir(parents=True)
    (top / "bin/kubectl").write_bytes(b"x" * 1000)
    testbed.write_manifest(top, ["bin/kubectl"], {})
    with open(top / "bin/kubectl", "r+b") as f:
        f.truncate(10)
    [problem] = testbed.manifest_problems(top)
    assert "bin/kubectl: size 10, expected 1000 (truncated?)" in problem


def test_an_altered_binary_of_the_same_size_is_reported(testbed, tmp_path):
    top = tmp_path / "tool"
    (top / "bin").mkdir(parents=True)
    (top / "bin/kubectl").write_bytes(b"a" * 100)
    testbed.write_manifest(top, ["bin/kubectl"], {})
    (top / "bin/kubectl").write_bytes(b"b" * 100)
    [problem] = testbed.manifest_problems(top)
    assert "checksum differs" in problem


def test_a_missing_build_is_reported_with_the_command_that_builds_it(testbed):
    with pytest.raises(testbed.BedError) as err:
        testbed.require_built()
    assert "not built" in str(err.value)
    assert f"scripts/testbed --kubernetes {testbed.K8S_VERSION} build" in str(err.value)


def test_the_minted_jwt_carries_the_claims_slurm_reads_and_verifies_with_the_key(testbed):
    key = b"k" * 64
    token = testbed.mint_jwt(key, "slurm", 3600)
    header, body, sig = token.split(".")
    pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
    claims = json.loads(base64.urlsafe_b64decode(pad(body)))
    assert json.loads(base64.urlsafe_b64decode(pad(header))) == {"alg": "HS256", "typ": "JWT"}
    assert claims["sun"] == "slurm"
    assert claims["exp"] - claims["iat"] == 3600
    assert {"nbf", "jti", "iss"} <= claims.keys()
    want = hmac.new(key, f"{header}.{body}".encode(), hashlib.sha256).digest()
    assert base64.urlsafe_b64decode(pad(sig)) == want


def test_ports_in_use_move_the_bed_to_another_block(testbed):
    bed = testbed.Bed(name="a", dir=testbed.beds_dir() / "a")
    testbed.beds_dir().mkdir(parents=True)
    first = testbed.allocate_base(bed)
    with socket.socket() as s:
        s.bind(("127.0.0.1", first + 3))
        s.listen()
        second = testbed.allocate_base(bed)
    assert second != first
    assert not (second <= first + 3 < second + testbed.PORT_BLOCK)


def test_a_bed_keeps_its_block_when_it_is_still_free(testbed):
    testbed.beds_dir().mkdir(parents=True)
    bed = testbed.Bed(name="a", dir=testbed.beds_dir() / "a")
    bed.base = testbed.allocate_base(bed) + testbed.PORT_BLOCK * 3
    assert testbed.allocate_base(bed) == bed.base


def test_blocks_owned_by_other_beds_are_skipped(testbed):
    testbed.beds_dir().mkdir(parents=True)
    other = testbed.Bed(name="other", dir=testbed.beds_dir() / "other")
    other.dir.mkdir()
    other.base = testbed.allocate_base(other)
    other.save()
    mine = testbed.Bed(name="mine", dir=testbed.beds_dir() / "mine")
    assert testbed.allocate_base(mine) != other.base


def test_env_lines_are_valid_shell_and_name_the_required_variables(testbed):
    bed = testbed.Bed(name="x y", dir=testbed.beds_dir() / "x y", base=21000)
    lines = testbed.env_lines(bed)
    values = {}
    for line in lines:
        word, assignment = shlex.split(line)
        assert word == "export"
        key, value = assignment.split("=", 1)
        values[key] = value
    required = {"KUBECONFIG", "SLURMRESTD_URL", "SLURM_JWT", "SLURM_JWT_KEY", "SLURM_ROOT", "TESTBED_DIR"}
    assert required <= values.keys()
    assert values["SLURMRESTD_URL"] == "http://127.0.0.1:21008"
    assert values["TESTBED_DIR"].endswith("/x y")


def test_every_port_of_a_bed_is_inside_its_block(testbed):
    bed = testbed.Bed(name="a", dir=testbed.beds_dir() / "a", base=22000, nodes=testbed.MAX_NODES)
    ports = [bed.port(k) for k in testbed.OFFSETS] + [bed.node_port(i) for i in range(1, bed.nodes + 1)]
    ports += [testbed.node_port(bed, k) for k in testbed.NODE_OFFSETS]
    assert len(set(ports)) == len(ports)
    assert all(22000 <= p < 22000 + testbed.PORT_BLOCK for p in ports)


@pytest.mark.parametrize("state,ready", [("idle", True), ("maint", True), ("mixed", True),
                                         ("idle*", False), ("drained", False), ("down*", False),
                                         ("future", False), ("idle~", False)])
def test_a_node_is_ready_when_it_answers_and_can_take_work(testbed, state, ready):
    assert testbed.node_ready(state) is ready


def test_the_slurm_conf_binds_daemons_to_their_addresses_not_to_any(testbed):
    bed = testbed.Bed(name="a", dir=testbed.beds_dir() / "a", base=22000)
    conf = testbed.slurm_conf(bed)
    assert "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny" in conf
    assert "SlurmctldPort=22006" in conf
    # An empty Topology= swallows the next token; the nvlink partition names its topology.
    assert re.search(r"Topology=(\s|$)", conf) is None
    assert "PartitionName=nvlink Nodes=tb State=UP MaxTime=INFINITE Topology=nvlink" in conf


def test_an_optional_tool_names_each_binary_of_its_packages(testbed):
    assert testbed.tool_files("keda") == ["bin/operator", "bin/adapter"]
    assert testbed.tool_path("keda/adapter") == testbed.tool_dir("keda") / "bin" / "adapter"
    assert testbed.tool_files("helm") == ["bin/helm"]
    with pytest.raises(testbed.BedError, match="keda/operator"):
        testbed.tool_path("keda/nothing")


def test_slinkys_operator_is_an_optional_tool_of_one_binary(testbed):
    assert testbed.tool_files("slinky") == ["bin/manager"]
    assert testbed.tool_path("slinky/manager") == testbed.tool_dir("slinky") / "bin" / "manager"


def test_every_kube_node_has_its_own_address_pod_subnet_namespace_and_cgroup(testbed):
    import ipaddress
    bed = testbed.Bed(name="a-long-bed-name", dir=testbed.beds_dir() / "a")
    nodes = range(1, testbed.MAX_KUBE_NODES + 1)
    bridge = ipaddress.ip_network(testbed.NODE_SUBNET)
    pods = [ipaddress.ip_network(testbed.pod_subnet(i)) for i in nodes]
    ips = [ipaddress.ip_address(testbed.node_ip(i)) for i in nodes]
    assert len(set(ips)) == len(ips) and all(ip in bridge for ip in ips)
    assert ipaddress.ip_address(testbed.HOST_IP) in bridge and ipaddress.ip_address(testbed.HOST_IP) not in ips
    # Each Node's pods in the cluster's pod network, none overlapping another's or the bridge.
    cluster = ipaddress.ip_network(testbed.POD_CIDR)
    assert all(p.subnet_of(cluster) and not p.overlaps(bridge) for p in pods)
    assert all(not a.overlaps(b) for a in pods for b in pods if a is not b)
    assert not ipaddress.ip_network(testbed.SERVICE_CIDR).overlaps(cluster)
    assert len({testbed.node_netns(bed, i) for i in nodes}) == len(nodes)
    assert len({testbed.node_cgroup(bed, i) for i in nodes}) == len(nodes)
    assert all(len(testbed.node_uplink(i)) <= 15 for i in nodes)  # IFNAMSIZ
    assert [testbed.node_name(bed, i) for i in (1, 2)] == ["a-long-bed-name-node-1", "a-long-bed-name-node-2"]


def test_a_bed_keeps_the_kubernetes_release_that_wrote_its_etcd(testbed):
    import argparse
    bed = testbed.Bed(name="b", dir=testbed.beds_dir() / "b", kubernetes=testbed.K8S_VERSIONS[-1])
    bed.dir.mkdir(parents=True)
    bed.save()
    args = argparse.Namespace(name="b", command="status", kubernetes="")
    testbed.choose_kubernetes(args)
    assert testbed.K8S_VERSION == testbed.K8S_VERSIONS[-1]
    with pytest.raises(testbed.BedError, match="destroy it first"):
        testbed.choose_kubernetes(argparse.Namespace(name="b", command="up", kubernetes=testbed.K8S_VERSIONS[0]))
    with pytest.raises(testbed.BedError, match="--kubernetes v1.99.0"):
        testbed.choose_kubernetes(argparse.Namespace(name="new", command="up", kubernetes="v1.99.0"))
    testbed.choose_kubernetes(argparse.Namespace(name="new", command="up", kubernetes=""))
    assert testbed.K8S_VERSION == testbed.K8S_VERSIONS[0]


def test_each_kubernetes_release_has_its_own_pinned_module(testbed):
    for version in testbed.K8S_VERSIONS:
        mod = (testbed.REPO / "testbed/k8s" / version / "go.mod").read_text()
        assert re.search(rf"^\s*(require )?k8s\.io/kubernetes {re.escape(version)}( // indirect)?$", mod, re.M)
        staging = "v0." + version.removeprefix("v1.")
        assert f"k8s.io/api => k8s.io/api {staging}" in mod
        assert (testbed.REPO / "testbed/k8s" / version / "go.sum").exists()
