"""Fault injectors owned by the tests: a redis-server of their own, and a TCP proxy to Postgres
that can refuse connections and cut the open ones."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

from tests.serving import free_port


class RedisServer:
    """A ``redis-server`` on its own free port that a test can kill and start again."""

    def __init__(self, root: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        self._binary = binary
        self._root = root
        self.port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        assert self._proc is not None, "the server is not running"
        return self._proc.pid

    def start(self) -> None:
        args = [self._binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--save", "", "--appendonly", "no", "--dir", str(self._root)]
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        for _ in range(200):  # a readiness wait, not a test limit
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
            finally:
                client.close()
        pytest.fail(f"redis-server did not start on port {self.port}")

    def kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


class PostgresProxy:
    """Forwards a loopback port to Postgres; ``refuse()`` closes it and cuts every open
    connection, ``accept()`` listens again on the same port."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def accept(self) -> None:
        self._server = await asyncio.start_server(self._pipe, "127.0.0.1", self.port)

    async def refuse(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(
            _copy(reader, up_writer), _copy(up_reader, writer), return_exceptions=True
        )
        for end in (writer, up_writer):
            self._writers.discard(end)
            end.transport.abort()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.transport.abort()


class PostgresCluster:
    """A throwaway Postgres cluster of the test's own (initdb in a temp folder, a free port),
    with a non-superuser ``app`` role that owns the ``plaudit`` database, so a test can refuse,
    limit, stop and make it read-only without touching the shared server. Postgres will not
    run as root, so under root its tools run as the ``postgres`` system user."""

    def __init__(self) -> None:
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if not found:
            pytest.skip("Postgres server binaries are not installed")
        self._bin = found[-1].parent
        self._root = Path(tempfile.mkdtemp(prefix="plaudit-pg-"))
        self._as: list[str] = []
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self._root, "postgres")
        self._data = self._root / "data"
        self.port = free_port()

    def url(self, role: str = "app") -> str:
        return f"postgresql+asyncpg://{role}@127.0.0.1:{self.port}/plaudit"

    def init(self) -> None:
        self._run("initdb", "-D", str(self._data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.start()
        self.sql("postgres", "CREATE ROLE app LOGIN", "CREATE DATABASE plaudit OWNER app")

    def start(self) -> None:
        options = f"-p {self.port} -k {self._root} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self._root / "pg.log")
        self._run("pg_ctl", "-D", str(self._data), "-o", options, "-w", "-l", log, "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self._data), "-m", "immediate", "-w", "stop")

    def destroy(self) -> None:
        """Stop the server (if it runs) and remove its folder."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop()
        shutil.rmtree(self._root, ignore_errors=True)

    def sql(self, database: str, *statements: str) -> None:
        """Run statements as the superuser, each in its own transaction."""
        address = ["-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database]
        for statement in statements:
            self._run("psql", *address, "-v", "ON_ERROR_STOP=1", "-qc", statement)

    def terminate_app_connections(self) -> None:
        self.sql(
            "postgres",
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'app'",
        )

    def _run(self, tool: str, *args: str) -> None:
        command = [*self._as, str(self._bin / tool), *args]
        subprocess.run(command, check=True, capture_output=True, cwd=self._root)
