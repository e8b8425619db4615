"""A real Cinder deployment for the tests: RabbitMQ, MariaDB, cinder-api, -scheduler, -volume.

Every part is a process of its own that the test owns, on private ports, data
directories and names, so it runs beside anything else on the machine and
leaves nothing behind:

* RabbitMQ (Debian's ``rabbitmq-server``): a private Erlang node with its own
  epmd port, mnesia directory and cookie (``HOME``), not the system service,
  which a test may neither restart nor share with other users of the host;
* MariaDB (Debian's ``mariadb-server``): ``mariadb-install-db`` on a private
  datadir, ``mariadbd`` on a private socket and port, Cinder through PyMySQL;
* ``cinder-manage db sync``, then ``cinder-scheduler`` and ``cinder-volume``
  from Cinder's console scripts, and ``cinder-api`` as Cinder's WSGI application
  (``cinder.wsgi.api``) under gunicorn, in noauth mode (DevStack serves the API
  through a WSGI server too; Cinder's eventlet server is deprecated with eventlet).

``openstack()`` runs python-openstackclient as a user types it, with the
``admin_token`` auth plugin: Cinder's noauth middleware takes the token
``user:project`` and makes that request context an admin.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BIN = Path(sys.executable).parent
RABBIT_BIN = Path("/usr/lib/rabbitmq/bin")
APT_PACKAGES = ("rabbitmq-server", "mariadb-server")
MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
#: short periods, so that a report reaches the scheduler within seconds
PERIODS = {"report_interval": 2, "graceful_shutdown_timeout": 5, "periodic_interval": 1, "periodic_fuzzy_delay": 0,
           "backend_stats_polling_interval": 3, "scheduler_driver_init_wait_time": 3}
STATS_PERIOD_S = PERIODS["backend_stats_polling_interval"]


def missing_parts() -> list[str]:
    """What this machine lacks to run the deployment (empty: nothing)."""
    needed = {"rabbitmq-server": RABBIT_BIN / "rabbitmq-server",
              "mariadb-server": Path(MARIADBD),
              "cinder": BIN / "cinder-volume", "gunicorn": BIN / "gunicorn",
              "python-openstackclient": BIN / "openstack"}
    return [name for name, path in needed.items() if not path.exists()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(what: str, check: Callable[[], Any], timeout_s: float,
             interval_s: float = 0.3) -> Any:
    """``check()``'s first true answer, polled until ``timeout_s``; else an error saying what."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = check()
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:g} s")
        time.sleep(interval_s)


@dataclass
class Service:
    """One server process in a session of its own, its output in ``log``."""

    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=REPO, env=self.env,
                                         start_new_session=True)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 15) -> None:
        """TERM to its process group, KILL after ``timeout_s``: bounded, whatever it does."""
        if self.proc is None:
            return
        for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        self.proc = None

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class RabbitMQ:
    """A private RabbitMQ node: its own name, ports, data directory and Erlang cookie."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir / "rabbitmq"
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "enabled_plugins").write_text("[].\n")
        self.port = free_port()
        self.node = f"dk{os.getpid()}@localhost"
        self.env = {**os.environ, "HOME": str(self.dir), "RABBITMQ_NODENAME": self.node,
                    "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
                    "RABBITMQ_NODE_PORT": str(self.port),
                    "RABBITMQ_DIST_PORT": str(free_port()), "ERL_EPMD_PORT": str(free_port()),
                    "RABBITMQ_MNESIA_BASE": str(self.dir / "mnesia"),
                    "RABBITMQ_LOG_BASE": str(self.dir / "log"), "RABBITMQ_LOGS": "-",
                    "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.dir / "enabled_plugins"),
                    "RABBITMQ_PID_FILE": str(self.dir / "pid")}
        self.server = Service("rabbitmq", [str(RABBIT_BIN / "rabbitmq-server")],
                              self.dir / "server.log", env=self.env)

    @property
    def url(self) -> str:
        return f"rabbit://guest:guest@127.0.0.1:{self.port}/"

    def _ctl(self, *argv: str, timeout_s: float = 30) -> bool:
        try:
            return subprocess.run([str(RABBIT_BIN / "rabbitmqctl"), "-n", self.node, *argv],
                                  env=self.env, capture_output=True,
                                  timeout=timeout_s).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def consumers(self) -> dict[str, int]:
        """Each queue's consumer count, as ``rabbitmqctl list_queues`` gives it."""
        try:
            out = subprocess.run([str(RABBIT_BIN / "rabbitmqctl"), "-n", self.node, "-q",
                                  "list_queues", "name", "consumers"], env=self.env,
                                 capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            return {}
        counts: dict[str, int] = {}
        for line in out.stdout.splitlines() if out.returncode == 0 else ():
            name, _, count = line.rpartition("\t")
            if name and count.isdigit():
                counts[name] = int(count)
        return counts

    def start(self, timeout_s: float = 60) -> None:
        self.server.start()
        self.wait_started(timeout_s)

    def wait_started(self, timeout_s: float) -> None:
        """Until its AMQP port takes connections (its listeners open last); not
        ``rabbitmqctl await_startup``, an Erlang VM start per look (a minute without KVM)."""
        wait_for("RabbitMQ started", lambda: self._listening()
                 or not self.server.running() and self._died(), timeout_s, interval_s=0.5)

    def _listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=5).close()
            return True
        except OSError:
            return False

    def _died(self) -> bool:
        raise RuntimeError(f"rabbitmq-server exited:\n{self.server.tail()}")

    def stop(self) -> None:
        self._ctl("stop", timeout_s=30)
        self.server.stop(timeout_s=10)
        # the node's own epmd outlives it, on its private port
        subprocess.run(["epmd", "-kill"], env=self.env, capture_output=True, timeout=10)


class MariaDB:
    """A private MariaDB server: its own datadir, socket and port; a ``cinder`` database."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir / "mariadb"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.socket = self.dir / "mariadb.sock"
        root = ["--user=root"] if os.geteuid() == 0 else []
        self.install = ["mariadb-install-db", "--no-defaults", f"--datadir={self.dir / 'data'}",
                        "--auth-root-authentication-method=normal", "--skip-test-db", *root]
        self.server = Service("mariadb", [
            MARIADBD, "--no-defaults", f"--datadir={self.dir / 'data'}",
            f"--socket={self.socket}", f"--port={self.port}", "--bind-address=127.0.0.1",
            "--skip-log-bin", "--innodb-buffer-pool-size=32M", "--max-connections=500",
            f"--pid-file={self.dir / 'mariadb.pid'}", *root], self.dir / "server.log")

    @property
    def url(self) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/cinder?charset=utf8"

    def _sql(self, statement: str) -> bool:
        return subprocess.run(["mariadb", "--no-defaults", f"--socket={self.socket}", "-uroot",
                               "-e", statement], capture_output=True,
                              timeout=30).returncode == 0

    def start(self, timeout_s: float = 60) -> None:
        subprocess.run(self.install, check=True, capture_output=True, timeout=2 * timeout_s)
        self.server.start()
        wait_for("MariaDB accepting connections", lambda: self._sql("SELECT 1"), timeout_s)
        assert self._sql("CREATE DATABASE cinder CHARACTER SET utf8")

    def load(self, schema: Path, timeout_s: float = 60) -> None:
        """The ``cinder`` database from ``dump``'s file: what ``db sync`` would make."""
        with open(schema, "rb") as sql:
            proc = subprocess.run(["mariadb", "--no-defaults", f"--socket={self.socket}",
                                   "-uroot", "cinder"], stdin=sql, capture_output=True,
                                  timeout=timeout_s)
        if proc.returncode:
            raise RuntimeError(f"loading {schema} failed:\n{proc.stderr.decode()[-3000:]}")

    def dump(self, schema: Path, timeout_s: float = 60) -> None:
        """The ``cinder`` database (tables and rows) as SQL into ``schema``."""
        with open(schema, "wb") as sql:
            subprocess.run(["mariadb-dump", "--no-defaults", f"--socket={self.socket}",
                            "-uroot", "cinder"], stdout=sql, check=True, timeout=timeout_s)

    def stop(self) -> None:
        self.server.stop(timeout_s=20)


def ini(sections: dict[str, dict[str, Any]]) -> str:
    """``sections`` as an INI file (booleans as Cinder spells them)."""
    lines: list[str] = []
    for name, options in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {str(v).lower() if isinstance(v, bool) else v}"
                  for k, v in options.items()]
    return "\n".join(lines) + "\n"


@dataclass
class Cinder:
    """cinder-api (gunicorn), cinder-scheduler and cinder-volume on one cinder.conf."""

    workdir: Path
    backends: dict[str, dict[str, Any]]
    transport_url: str
    database_url: str
    #: gunicorn kills a worker silent this long, its app's import included
    api_worker_timeout_s: int = 120
    #: how long cinder-api waits for the volume service's answer (an iSCSI export runs
    #: cinder-rtstool several times: over a minute in a loaded VM without KVM)
    rpc_timeout_s: int = 60
    #: Cinder's periodic tasks' settings (``PERIODS``, or longer ones where CPU is scarce)
    periods: dict[str, Any] = field(default_factory=lambda: dict(PERIODS))
    api_port: int = field(default_factory=free_port)
    services: dict[str, Service] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.conf = self.workdir / "cinder.conf"
        paste = Path(sys.prefix) / "etc" / "cinder" / "api-paste.ini"
        self.conf.write_text(ini({
            "DEFAULT": {"enabled_backends": ",".join(self.backends),
                        "transport_url": self.transport_url, "auth_strategy": "noauth",
                        "api_paste_config": paste,
                        "resource_query_filters_file": paste.with_name("resource_filters.json"),
                        "state_path": self.workdir / "state",
                        "reinit_driver_count": 0, "debug": False, **self.periods,
                        "rpc_response_timeout": self.rpc_timeout_s,
                        # the scenarios make more than the default quota of 10 volumes
                        "quota_volumes": -1, "quota_snapshots": -1, "quota_gigabytes": -1},
            "database": {"connection": self.database_url},
            "oslo_concurrency": {"lock_path": self.workdir / "locks"},
            "coordination": {"backend_url": f"file://{self.workdir / 'coordination'}"},
            **self.backends}))
        # the code under test first; what the caller adds (e.g. rtslib for cinder-rtstool) after
        pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        # faulthandler on SIGABRT: ``dump_stacks``' last resort, whatever a process is stuck in
        env = {**os.environ, "PYTHONPATH": pythonpath, "DK_CINDER_CONF": str(self.conf),
               "PYTHONFAULTHANDLER": "1"}
        conf = ["--config-file", str(self.conf)]
        logs = self.workdir / "logs"
        logs.mkdir(exist_ok=True)
        self.services = {
            "api": Service("cinder-api", [
                str(BIN / "gunicorn"), "--bind", f"127.0.0.1:{self.api_port}", "--workers", "1",
                "--threads", "8", "--timeout", str(self.api_worker_timeout_s),
                "--chdir", str(REPO),
                "tests.ecosystem.cinder_api_wsgi:application"], logs / "api.log", env),
            "scheduler": Service("cinder-scheduler", [str(BIN / "cinder-scheduler"), *conf],
                                 logs / "scheduler.log", env),
            "volume": Service("cinder-volume", [str(BIN / "cinder-volume"), *conf],
                              logs / "volume.log", env)}
        self.env = env

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.api_port}/v3"

    def db_sync(self, timeout_s: float = 300) -> None:
        proc = subprocess.run([str(BIN / "cinder-manage"), "--config-file", str(self.conf),
                               "db", "sync"], env=self.env, capture_output=True, text=True,
                              timeout=timeout_s, cwd=REPO)
        if proc.returncode:
            raise RuntimeError(f"cinder-manage db sync failed:\n{proc.stderr[-4000:]}")

    def start(self) -> None:
        for service in self.services.values():
            service.start()

    def stop(self) -> None:
        for service in reversed(list(self.services.values())):
            service.stop()

    def logs(self) -> str:
        return "\n".join(f"----- {s.name}\n{s.tail()}" for s in self.services.values())

    def dump_stacks(self, wait_s: float = 10) -> None:
        """Every green and native thread's stack into the scheduler's and volume's logs
        (oslo.reports' Guru Meditation report, on SIGUSR2), then every native thread's
        by faulthandler on SIGABRT, which ends them: it answers even when the
        interpreter never gets back to a Python signal handler. For a start that
        failed; gunicorn takes SIGUSR2 as an upgrade, so cinder-api is left alone."""
        for sig in (signal.SIGUSR2, signal.SIGABRT):
            for name in ("scheduler", "volume"):
                service = self.services[name]
                if service.running():
                    assert service.proc is not None
                    os.killpg(service.proc.pid, sig)
            time.sleep(wait_s)


@dataclass
class Deployment:
    """The running parts and the OpenStack client pointed at them."""

    rabbit: RabbitMQ
    database: MariaDB
    cinder: Cinder
    timings: dict[str, float] = field(default_factory=dict)

    def client_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        env.update({"OS_AUTH_TYPE": "admin_token", "OS_TOKEN": "admin:admin",
                    "OS_ENDPOINT": self.cinder.endpoint, "OS_VOLUME_API_VERSION": "3"})
        return env

    def openstack(self, *argv: str, check: bool = True, timeout_s: float = 120) -> Any:
        """``openstack <argv> -f json`` as a user types it; its JSON answer (None if empty).

        Commands that answer nothing (``delete``, ``set``) take no ``-f``."""
        quiet = bool({"delete", "set"} & set(argv[:3]))
        proc = subprocess.run([str(BIN / "openstack"), *argv, *([] if quiet else ["-f", "json"])],
                              env=self.client_env(), capture_output=True, text=True,
                              timeout=timeout_s)
        if check and proc.returncode:
            raise RuntimeError(f"openstack {' '.join(argv)} failed ({proc.returncode}):\n"
                               f"{proc.stderr[-3000:]}")
        if proc.returncode:
            return {"error": proc.stderr.strip()}
        return json.loads(proc.stdout) if proc.stdout.strip() else None

    def api(self, path: str, body: Any = None, *, method: str | None = None) -> Any:
        """``GET`` (or, with ``body``, ``POST``) ``/v3/<path>`` on cinder-api with the noauth
        token, as Nova's python-cinderclient calls it; the JSON answer (None if empty).
        For polling too, which through the CLI would cost a process start per look."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.cinder.endpoint}/{path}", data=data,
                                         method=method, headers={
            "X-Auth-Token": "admin:admin", "Accept": "application/json",
            "Content-Type": "application/json", "OpenStack-API-Version": "volume 3.70"})
        # a call's answer may wait for the volume service's: longer than that, then
        with urllib.request.urlopen(request, timeout=self.cinder.rpc_timeout_s + 30) as answer:
            text = answer.read()
        return json.loads(text) if text.strip() else None

    def stop(self) -> None:
        """Every part, last started first; each bounded, each tried whatever the others do."""
        for stop in (self.cinder.stop, self.rabbit.stop, self.database.stop):
            try:
                stop()
            except Exception:  # noqa: BLE001 - the next part is stopped all the same
                pass


def start_deployment(workdir: Path, backends: dict[str, dict[str, Any]], *,
                     patience: float = 1.0, schema: Path | None = None,
                     bus_first: bool = False, periods: dict[str, Any] | None = None,
                     progress: Callable[[str], None] | None = None) -> Deployment:
    """Start every part (stopping what started if one fails); ``timings`` says how long each
    took (RabbitMQ's from its launch, which overlaps the others), ``progress`` hears each as
    it ends. ``patience`` multiplies every start's time
    limit (a VM without KVM is slow). ``schema``: the database loaded from
    ``dump_schema``'s file instead of ``db sync`` (minutes of alembic in the VM).
    ``bus_first``: the services start once RabbitMQ listens, not during its boot: on
    the VM's two emulated CPUs their imports starved the Erlang VM (over 5 min).
    ``periods``: Cinder's periodic settings instead of ``PERIODS``."""
    timings: dict[str, float] = {}
    rabbit, database = RabbitMQ(workdir), MariaDB(workdir)
    cinder = Cinder(workdir, backends, rabbit.url, database.url,
                    api_worker_timeout_s=int(120 * patience), rpc_timeout_s=int(60 * patience),
                    periods=periods or dict(PERIODS))
    deployment = Deployment(rabbit, database, cinder, timings)
    begun = time.monotonic()
    try:
        # the Erlang VM's boot (minutes without KVM) overlaps the database's start and
        # the services' imports; they connect once the bus listens (oslo.messaging retries)
        rabbit.server.start()
        steps = [("mariadb", lambda: database.start(60 * patience)),
                 ("db sync", lambda: cinder.db_sync(300 * patience)) if schema is None
                 else ("db load", lambda: database.load(schema, 60 * patience)),
                 ("services", cinder.start),
                 ("rabbitmq", lambda: rabbit.wait_started(60 * patience))]
        if bus_first:
            steps[2], steps[3] = steps[3], steps[2]
        for name, step in steps:
            t0 = time.monotonic()
            step()
            timings[name] = time.monotonic() - (begun if name == "rabbitmq" else t0)
            if progress:
                progress(f"{name}: {timings[name]:.1f} s")
        t0 = time.monotonic()
        wait_for("every service up and every pool reported",
                 lambda: _all_reported(deployment, backends), 180 * patience, interval_s=1)
        timings["services up and pools reported"] = time.monotonic() - t0
    except BaseException:
        cinder.dump_stacks(wait_s=5 * patience)
        logs = "\n".join([cinder.logs(), f"----- rabbitmq\n{rabbit.server.tail()}",
                          f"----- mariadb\n{database.server.tail()}"])
        deployment.stop()
        raise RuntimeError(f"the deployment did not start:\n{logs}")
    timings["total"] = time.monotonic() - begun
    return deployment


def _all_reported(deployment: Deployment, backends: dict[str, Any]) -> bool:
    """Every service running, and every backend's pools in the scheduler's answer."""
    for service in deployment.cinder.services.values():
        if not service.running():
            raise RuntimeError(f"{service.name} exited:\n{service.tail()}")
    try:
        pools = deployment.api("scheduler-stats/get_pools")["pools"]
    except OSError:  # cinder-api not listening yet
        return False
    return {p["name"].partition("@")[2].partition("#")[0] for p in pools} >= set(backends)


def dump_schema(schema: Path) -> None:
    """Cinder's database as ``db sync`` makes it, dumped as SQL into ``schema``: made on
    the host in seconds for a deployment in the VM (``start_deployment(schema=...)``)."""
    workdir = schema.parent / f"{schema.name}.work"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    database = MariaDB(workdir)
    try:
        database.start()
        Cinder(workdir, {}, "rabbit://unused/", database.url).db_sync()
        database.dump(schema)
    finally:
        database.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    dump_schema(Path(sys.argv[1]).resolve())
