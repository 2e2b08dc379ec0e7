"""`replog acls` against a broker with an authorizer: kafka-acls' --add, --list and --remove, their output,
and the refusals a user meets. The command connects on the PLAINTEXT listener, whose `User:ANONYMOUS` is a
super user here; alice, on the SASL listener, is the witness that the bindings take effect."""

import asyncio
import subprocess
import sys

from replog.protocol.apis import ApiKey
from tests.acl_cluster import PRODUCE_VERSION, USERS, acl_cluster, error_codes, produce_request

CLI = [sys.executable, "-m", "replog"]
TOPIC_AUTHORIZATION_FAILED = 29
TIMEOUT_S = 60


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, timeout=TIMEOUT_S, text=True)


async def produce_codes(cluster) -> set[int]:
    alice = await cluster.connection("alice")
    try:
        return error_codes(await alice.send(ApiKey.PRODUCE, produce_request("orders"), version=PRODUCE_VERSION))
    finally:
        alice.close()


async def test_add_list_remove(tmp_path):
    async with acl_cluster(tmp_path, with_controller=False, **{"super.users": "User:admin;User:ANONYMOUS"}) as cluster:
        server = ["--bootstrap-server", cluster.broker.bootstrap]
        created = await asyncio.to_thread(run, "topics", "create", *server, "--topic", "orders")
        assert created.returncode == 0, created.stderr
        assert TOPIC_AUTHORIZATION_FAILED in await produce_codes(cluster)

        added = await asyncio.to_thread(run, "acls", *server, "--add", "--allow-principal", "User:alice",
                                        "--operation", "Write", "--topic", "ord", "--resource-pattern-type", "prefixed")
        assert added.returncode == 0, added.stderr
        assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in added.stdout
        assert await produce_codes(cluster) == {0}

        listed = await asyncio.to_thread(run, "acls", *server, "--list", "--topic", "orders",
                                         "--resource-pattern-type", "match")
        assert listed.returncode == 0, listed.stderr
        assert ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=ord, patternType=PREFIXED)`: "
                in listed.stdout)

        removed = await asyncio.to_thread(run, "acls", *server, "--remove", "--topic", "ord",
                                          "--resource-pattern-type", "prefixed")
        assert removed.returncode == 0, removed.stderr
        assert "operation=WRITE" in removed.stdout
        assert TOPIC_AUTHORIZATION_FAILED in await produce_codes(cluster)
        assert "Current ACLs" not in (await asyncio.to_thread(run, "acls", *server, "--list")).stdout

        invalid = await asyncio.to_thread(run, "acls", *server, "--add", "--allow-principal", "User:alice",
                                          "--operation", "Write", "--group", "g")
        assert invalid.returncode != 0 and "Invalid operation WRITE for GROUP" in invalid.stderr

        alice_sasl = await asyncio.to_thread(run, "acls", "--bootstrap-server", cluster.bootstrap, "--list")
        assert alice_sasl.returncode != 0  # a SASL listener without credentials: the connection is refused


async def test_acls_without_an_authorizer_say_security_is_disabled(tmp_path):
    async with acl_cluster(tmp_path, with_controller=False, **{"authorizer.class.name": ""}) as cluster:
        listed = await asyncio.to_thread(run, "acls", "--bootstrap-server", cluster.broker.bootstrap, "--list")
        assert listed.returncode != 0 and "No Authorizer is configured" in listed.stderr


async def test_command_config_logs_the_acls_command_in_as_its_user(tmp_path):
    async with acl_cluster(tmp_path, with_controller=False) as cluster:
        admin_config = tmp_path / "admin.properties"
        admin_config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                                f"sasl.username=admin\nsasl.password={USERS['admin']}\n")
        added = await asyncio.to_thread(run, "acls", "--bootstrap-server", cluster.bootstrap, "--command-config",
                                        str(admin_config), "--add", "--allow-principal", "User:alice",
                                        "--operation", "Write", "--topic", "orders")
        assert added.returncode == 0, added.stderr
        listed = await asyncio.to_thread(run, "acls", "--bootstrap-server", cluster.bootstrap, "--command-config",
                                         str(admin_config), "--list", "--topic", "orders")
        assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in listed.stdout
