"""What a user of a Cinder deployment types, and what the deployment answers.

Volume creates and clones, types and the pool listing go through
python-openstackclient (``openstack ... -f json``). Snapshots, manages, extends,
deletes, state resets and the service and user-message listings go through
python-cinderclient's ``cinder`` shell with its ``noauth`` plugin: the
openstackclient commands for them look the resource up through openstacksdk,
which asks ``/v3`` for its version document without a token, and Cinder's noauth
middleware answers such a request with a made-up token instead of a document
(``cinder`` discovers at ``/``). Waiting for a status polls the API itself
(``Deployment.api``): a client process per look would cost a second each.
"""

from __future__ import annotations

import subprocess
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any


from tests.ecosystem.deployment import BIN, Deployment, wait_for

#: a volume or snapshot no longer moving
SETTLED = {"available", "error", "in-use", "error_extending", "error_deleting"}


def parse_table(text: str) -> list[dict[str, str]]:
    """The rows of a table as ``cinder`` prints it."""
    rows = [line for line in text.splitlines() if line.startswith("|")]
    if not rows:
        return []
    split = [[cell.strip() for cell in line.strip("|").split("|")] for line in rows]
    return [dict(zip(split[0], row)) for row in split[1:]]


class User:
    """One user at a shell, with the deployment's endpoint in the environment."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment

    def openstack(self, *argv: str, check: bool = True) -> Any:
        return self.deployment.openstack(*argv, check=check)

    def cinder(self, *argv: str, microversion: str = "3.3") -> list[dict[str, str]]:
        """``cinder --os-volume-api-version <microversion> <argv>``, its table as rows."""
        env = self.deployment.client_env()
        env.pop("OS_AUTH_TYPE")
        proc = subprocess.run([str(BIN / "cinder"), "--os-auth-type", "noauth",
                               "--os-user-id", "admin", "--os-project-id", "admin",
                               "--os-endpoint", self.deployment.cinder.endpoint,
                               "--os-volume-api-version", microversion, *argv],
                              env=env, capture_output=True, text=True, timeout=120)
        if proc.returncode:
            raise RuntimeError(f"cinder {' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
        return parse_table(proc.stdout)

    # ---------------------------------------------------------------- reading
    def pools(self) -> dict[str, dict[str, Any]]:
        """``volume backend pool list --long``: pool name (host@backend#pool) -> capabilities."""
        return {p["Name"]: p["Capabilities"]
                for p in self.openstack("volume", "backend", "pool", "list", "--long")}

    def pools_now(self) -> dict[str, dict[str, Any]]:
        """The same from the API, for polling."""
        return {p["name"]: p["capabilities"]
                for p in self.deployment.api("scheduler-stats/get_pools?detail=True")["pools"]}

    def volume(self, ident: str) -> dict[str, Any]:
        """The volume as the API shows it (``openstack volume show`` prints these keys)."""
        return self.deployment.api(f"volumes/{ident}")["volume"]

    def volumes(self) -> list[dict[str, Any]]:
        return self.deployment.api("volumes/detail")["volumes"]

    def messages(self, resource_id: str) -> list[str]:
        """The user messages about one resource (``cinder message-list``), their text."""
        return [m["User Message"] for m in self.cinder("message-list")
                if m["Resource UUID"] == resource_id]

    def services_up(self) -> set[str]:
        return {f"{s['Binary']} {s['Host']}" for s in self.cinder("service-list")
                if s["State"] == "up"}

    # ---------------------------------------------------------------- acting
    def volume_type(self, name: str, **properties: str) -> str:
        argv = ["volume", "type", "create", name]
        for key, value in properties.items():
            argv += ["--property", f"{key.replace('__', ':')}={value}"]
        return self.openstack(*argv)["id"]

    def create(self, name: str, size: int, vtype: str | None = None, *,
               source: str | None = None, snapshot: str | None = None,
               wait: bool = True) -> dict[str, Any]:
        """``openstack volume create``; a copy (``source``, ``snapshot``) with ``cinder create``."""
        if source or snapshot:
            made = _shown(self.cinder("create", "--name", name, "--volume-type", str(vtype),
                                      *(["--source-volid", source] if source else []),
                                      *(["--snapshot-id", snapshot] if snapshot else []),
                                      str(size)))
        else:
            made = self.openstack("volume", "create", name, "--size", str(size),
                                  *(["--type", vtype] if vtype else []))
        return self.settled("volume", made["id"]) if wait else made

    def manage(self, name: str, lv: str, host: str, vtype: str) -> dict[str, Any]:
        """``cinder manage``: adopt an operator's LV as a volume."""
        made = _shown(self.cinder("manage", "--name", name, "--volume-type", vtype, host, lv))
        return self.settled("volume", made["id"])

    def extend(self, ident: str, size: int) -> dict[str, Any]:
        self.cinder("extend", ident, str(size))
        return wait_for(f"volume {ident} extend settled",
                        lambda: (v := self.volume(ident))["status"] != "extending" and v,
                        120, interval_s=0.2)

    def snapshot(self, name: str, volume: str) -> dict[str, Any]:
        made = _shown(self.cinder("snapshot-create", "--name", name, volume))
        return self.settled("volume snapshot", made["id"])

    def create_at_once(self, count: int, size: int, vtype: str) -> list[str]:
        """``count`` creates sent together through python-cinderclient's API, a thread
        each (as many client processes would cost a second of CPU each); their ids."""
        with warnings.catch_warnings():  # its imports use the cgi module (Python 3.11)
            warnings.simplefilter("ignore", DeprecationWarning)
            import cinderclient.client
            from keystoneauth1 import session, token_endpoint
        auth = token_endpoint.Token(self.deployment.cinder.endpoint, "admin:admin")
        client = cinderclient.client.Client("3", session=session.Session(auth=auth))
        with ThreadPoolExecutor(count) as pool:
            return list(pool.map(lambda i: client.volumes.create(
                size, name=f"rush-{i}", volume_type=vtype).id, range(count)))

    def settled(self, kind: str, ident: str, timeout_s: float = 120) -> dict[str, Any]:
        """The volume's or snapshot's record once its status settles."""
        path, key = ("snapshots", "snapshot") if "snapshot" in kind else ("volumes", "volume")
        return wait_for(f"{kind} {ident} settled",
                        lambda: (r := self.deployment.api(f"{path}/{ident}")[key])["status"]
                        in SETTLED and r, timeout_s, interval_s=0.2)

    def delete_everything(self) -> None:
        """Every snapshot, then every volume (``cinder delete``), each waited for until gone."""
        snapshots = self.deployment.api("snapshots")["snapshots"]
        if snapshots:
            self.cinder("snapshot-delete", *[snap["id"] for snap in snapshots])
        wait_for("snapshots gone", lambda: not self.deployment.api("snapshots")["snapshots"],
                 120)
        volumes = self.volumes()
        for vol in volumes:
            if vol["status"] not in ("available", "error"):
                self.cinder("reset-state", "--state", "error", vol["id"])
        if volumes:
            self.cinder("delete", *[vol["id"] for vol in volumes])
        wait_for("volumes gone", lambda: not self.deployment.api("volumes")["volumes"], 120)


def _shown(rows: list[dict[str, str]]) -> dict[str, str]:
    """A ``cinder`` show table (Property | Value) as a dict."""
    return {row["Property"]: row["Value"] for row in rows}


def host_pool(volume: dict[str, Any]) -> str | None:
    """``backend#pool`` of a volume's host (None: it never reached a backend)."""
    host = volume.get("os-vol-host-attr:host")
    return host.partition("@")[2] if host else None


def wait_reported(user: User, check: Any, timeout_s: float = 30) -> dict[str, Any]:
    """The pools once ``check(pools)`` holds: what the scheduler has after the next report."""
    t0 = time.monotonic()
    pools = wait_for("the pools' report", lambda: (p := user.pools_now()) and check(p) and p,
                     timeout_s, interval_s=0.3)
    pools["__waited_s"] = time.monotonic() - t0
    return pools
