"""CPU-bound work off the event loop: in a worker thread, or in worker processes under a CPU
ceiling.

Small inputs run inline (a thread hop would cost more than the work); inputs above
INLINE_CPU_CHARS run in a worker thread, so one request's large input never stalls the
event loop, and every other request with it.

The worker is one thread for the whole process: pure-Python work holds the GIL, so every
further busy thread would take GIL time from the event loop (30 concurrent packings on 30
threads left it a thirtieth). Large work queues behind large work; small work never waits.

Work whose cost an input can blow up (parsing a query's time expressions) runs in
:class:`WorkerProcesses` instead: a few processes, each call stopped at a CPU ceiling, and no
queue: a call that finds every process busy and the few places to wait taken is refused at
once, so no caller can fill a queue another one waits in.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, ParamSpec, TypeVar

from gql_memory.config import INLINE_CPU_CHARS

P = ParamSpec("P")
T = TypeVar("T")


@functools.cache
def _worker() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="gql-memory-cpu")


async def run_cpu(chars: int, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``work(*args, **kwargs)``, in the worker thread when ``chars`` is above the threshold."""
    return await run_cpu_when(chars > INLINE_CPU_CHARS, work, *args, **kwargs)


async def run_cpu_when(large: bool, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``work(*args, **kwargs)``, in the worker thread when the caller's measure of its
    input says it is ``large`` (e.g. a traversal's result of many neighbours), else inline."""
    if not large:
        return work(*args, **kwargs)
    call = functools.partial(work, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_worker(), call)


# --- worker processes under a CPU ceiling ---------------------------------------------------


class WorkStopped(Exception):
    """The work was not done; the message says why."""


class CeilingReached(WorkStopped):
    """The work used its CPU time and was stopped (its process lives on)."""


class WorkersBusy(WorkStopped):
    """Every worker was busy and every place to wait for one taken, or the wait ran out."""


class WorkerLost(WorkStopped):
    """The worker process died, or did not answer in time and was killed."""


START_TIMEOUT_S = 60.0  # a worker's start: the fork, the imports, the initializer
_READY, _DONE, _CEILING, _FAILED = "ready", "done", "ceiling", "failed"


@dataclass
class _Worker:
    process: Any  # multiprocessing's Process of the forkserver context
    conn: Connection

    async def call(self, message: tuple[Any, ...], kill_after_s: float) -> tuple[str, Any]:
        """Send one call and wait for its reply without holding the event loop."""
        loop = asyncio.get_running_loop()
        self.conn.send(message)
        readable: asyncio.Future[None] = loop.create_future()

        def answered() -> None:
            if not readable.done():
                readable.set_result(None)

        fd = self.conn.fileno()
        loop.add_reader(fd, answered)
        try:
            await asyncio.wait_for(readable, kill_after_s)
        finally:
            loop.remove_reader(fd)
        reply: tuple[str, Any] = self.conn.recv()
        return reply

    def kill(self) -> None:
        self.conn.close()
        self.process.kill()
        threading.Thread(target=self.process.join, daemon=True).start()  # reaped off the loop


class WorkerProcesses:
    """Up to ``size`` worker processes for pure-Python work that an input can make costly.

    Each call runs in a process of its own (no GIL taken from the event loop), stopped after
    ``cpu_seconds`` of CPU time (a timer signal inside the worker, which then serves the next
    call), and killed and replaced if it has not answered after ``kill_after_s`` of wall time.
    A call that finds every worker busy waits, with at most ``waiting`` others, up to
    ``wait_seconds`` for one; beyond that it is refused at once (WorkersBusy).

    Workers are forked from a server process that has imported ``preload`` (multiprocessing's
    forkserver: nothing of this process's threads or state is inherited); each runs at
    ``nice`` (above 0: the CPU goes to this process first when both want it) and runs
    ``initializer`` once before its first call. ``work`` and ``initializer`` must be
    module-level functions (they are sent by name). Workers start on first use, and end with
    this process. Safe to share between event loops and threads.
    """

    def __init__(
        self,
        size: int,
        *,
        waiting: int,
        name: str,
        preload: Sequence[str] = (),
        initializer: Callable[[], object] | None = None,
        nice: int = 0,
    ) -> None:
        self.size = size
        self.waiting = waiting
        self.name = name
        self.preload = list(preload)
        self.initializer = initializer
        self.nice = nice
        self.stopped = 0  # calls stopped at their ceiling
        self.killed = 0  # workers killed (no answer in time) or lost
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._workers = 0  # started, or starting
        self._starting = 0
        self._waiters: collections.deque[
            tuple[asyncio.AbstractEventLoop, asyncio.Future[_Worker]]
        ] = collections.deque()

    async def run(
        self,
        work: Callable[..., T],
        args: tuple[Any, ...],
        *,
        cpu_seconds: float,
        wait_seconds: float,
        kill_after_s: float,
    ) -> T:
        """``work(*args)`` in a worker, within ``cpu_seconds`` of CPU time; raises
        CeilingReached, WorkersBusy or WorkerLost when it was not done, and whatever
        ``work`` raised."""
        worker = await self._acquire(wait_seconds)
        try:
            kind, value = await worker.call((work, args, cpu_seconds), kill_after_s)
        except asyncio.CancelledError:  # the caller left: the worker finishes, then serves on
            threading.Thread(target=self._drain, args=(worker, kill_after_s), daemon=True).start()
            raise
        except TimeoutError:
            self._discard(worker)
            raise WorkerLost(f"no answer after {kill_after_s:g} s: killed") from None
        except (OSError, EOFError):
            self._discard(worker)
            raise WorkerLost("the worker process ended") from None
        except BaseException:
            self._discard(worker)
            raise
        self._release(worker)
        if kind == _CEILING:
            self.stopped += 1
            raise CeilingReached(f"stopped after {cpu_seconds * 1000:g} ms of CPU time")
        if kind == _FAILED:
            raise value
        result: T = value
        return result

    async def _acquire(self, wait_seconds: float) -> _Worker:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._idle:
                return self._idle.pop()
            if self._workers < self.size:
                self._workers += 1
                self._starting += 1
                waiter = None
            elif len(self._waiters) < self.waiting:
                waiter = loop.create_future()
                self._waiters.append((loop, waiter))
                # while a worker starts, waiting for it is not a sign of overload
                timeout = START_TIMEOUT_S if self._starting else wait_seconds
            else:
                raise WorkersBusy(f"all {self.size} workers busy, {self.waiting} calls waiting")
        if waiter is None:
            return await self._started(loop)
        try:
            return await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            with self._lock:
                if (loop, waiter) in self._waiters:
                    self._waiters.remove((loop, waiter))
            raise WorkersBusy(f"no worker free within {timeout * 1000:g} ms") from None

    async def _started(self, loop: asyncio.AbstractEventLoop) -> _Worker:
        starting = loop.run_in_executor(None, self._start)
        try:
            worker = await asyncio.shield(starting)
        except asyncio.CancelledError:  # the worker still comes up: for the next caller
            starting.add_done_callback(self._adopt)
            raise
        except BaseException:
            with self._lock:
                self._workers -= 1
                self._starting -= 1
            raise
        with self._lock:
            self._starting -= 1
        return worker

    def _adopt(self, starting: asyncio.Future[_Worker]) -> None:
        with self._lock:
            self._starting -= 1
            if starting.cancelled() or starting.exception() is not None:
                self._workers -= 1
                return
        self._release(starting.result())

    def _start(self) -> _Worker:
        """A new worker, ready (blocking: run in a thread)."""
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(self.preload)  # read when the fork server starts
        parent, child = context.Pipe()
        process = context.Process(
            target=_serve, args=(child, self.initializer, self.nice), name=self.name, daemon=True
        )
        try:
            process.start()
        except Exception as exc:  # e.g. in a daemonic process, which may have no children
            raise WorkerLost(f"no worker process could start: {exc}") from exc
        finally:
            child.close()
        worker = _Worker(process, parent)
        try:
            if not parent.poll(START_TIMEOUT_S) or parent.recv() != _READY:
                raise WorkerLost("the worker process did not start")
        except (OSError, EOFError):
            worker.kill()
            raise WorkerLost("the worker process did not start") from None
        except WorkerLost:
            worker.kill()
            raise
        return worker

    def _release(self, worker: _Worker) -> None:
        """Hand ``worker`` to the longest waiting call, or make it idle."""
        with self._lock:
            while self._waiters:
                loop, waiter = self._waiters.popleft()
                try:
                    loop.call_soon_threadsafe(self._hand, waiter, worker)
                    return
                except RuntimeError:  # that loop is closed
                    continue
            self._idle.append(worker)

    def _hand(self, waiter: asyncio.Future[_Worker], worker: _Worker) -> None:
        if waiter.done():  # the wait ran out or was cancelled meanwhile
            self._release(worker)
        else:
            waiter.set_result(worker)

    def _drain(self, worker: _Worker, kill_after_s: float) -> None:
        """The reply of a call whose caller left, read and dropped (in a thread)."""
        try:
            if worker.conn.poll(kill_after_s):
                worker.conn.recv()
                self._release(worker)
                return
        except (OSError, EOFError):
            pass
        self._discard(worker)

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._workers -= 1
            self.killed += 1


# --- inside a worker process ----------------------------------------------------------------


class _CpuCeiling(BaseException):
    """Raised in a worker by its CPU timer; a BaseException, so that no ``except Exception``
    of the work swallows it."""


_armed = False  # the timer's signal stops the work only between arming and disarming


def _stop_at_ceiling(signum: int, frame: object) -> None:
    if _armed:
        raise _CpuCeiling


def _serve(conn: Connection, initializer: Callable[[], object] | None, nice: int) -> None:
    """A worker's loop: (work, args, cpu_seconds) in, (kind, value) out, until the parent
    goes away."""
    os.nice(nice)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is the parent's to handle
    signal.signal(signal.SIGPROF, _stop_at_ceiling)
    if initializer is not None:
        initializer()
    conn.send(_READY)
    while True:
        try:
            work, args, cpu_seconds = conn.recv()
        except (EOFError, OSError):
            return
        reply = _bounded(work, args, cpu_seconds)
        try:
            conn.send(reply)
        except Exception as exc:  # a value or an error that does not pickle
            conn.send((_FAILED, RuntimeError(f"{reply[0]}: {exc!r}")))


def _bounded(
    work: Callable[..., Any], args: tuple[Any, ...], cpu_seconds: float
) -> tuple[str, Any]:
    """``work(*args)`` stopped after ``cpu_seconds`` of this process's CPU time (user and
    system: ITIMER_PROF)."""
    global _armed
    try:
        try:
            _armed = True
            signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
            return _DONE, work(*args)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            _armed = False
    except _CpuCeiling:
        _armed = False
        return _CEILING, None
    except Exception as exc:
        return _FAILED, exc
