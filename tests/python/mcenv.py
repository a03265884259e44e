"""Test helpers: start the real daemons for the Python suites.

The binaries come from $MC_AGENT_BIN and $MC_MASTER_BIN (meson sets them; a suite started
without them is skipped). Each daemon runs in a temporary directory with its log and a
ready file ("PID" or "PID PORT", written by rename), dies with the test process (PR_SET_PDEATHSIG)
and is stopped by the helper that started it.
"""

import ctypes
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

READY_S = 15.0
_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def binary(var):
    path = os.environ.get(var)
    if not path:
        raise unittest.SkipTest(f"${var} is not set")
    return path


class Daemon:
    def __init__(self, name, argv, workdir, env=None):
        self.name = name
        self.dir = workdir
        self.log = os.path.join(workdir, f"{name}.log")
        self.ready = os.path.join(workdir, f"{name}.ready")
        self.sock = os.path.join(workdir, f"{name}.sock")
        self.port = 0
        full = [a.format(sock=self.sock, ready=self.ready) for a in argv]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(full, stdout=log, stderr=subprocess.STDOUT,
                                         env=env, preexec_fn=_die_with_parent)

    def wait_ready(self):
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with open(self.ready) as f:
                    fields = f.read().split()  # "PID" or "PID PORT"
                if fields and int(fields[0]) == self.proc.pid:
                    self.port = int(fields[1]) if len(fields) > 1 else 0
                    return self
            except (OSError, ValueError):
                pass
            time.sleep(0.02)
        raise RuntimeError(f"{self.name} did not get ready:\n{self.log_tail()}")

    def log_tail(self, n=4096):
        try:
            with open(self.log, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self):
        """SIGTERM, then SIGKILL after a grace; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class Agent:
    """A standalone mc-agent (--dram dram, extra arguments)."""

    def __init__(self, dram="64M", extra=()):
        self.dir = tempfile.mkdtemp(prefix="mc-pytest-")
        argv = [binary("MC_AGENT_BIN"), "--standalone", "--socket", "{sock}", "--dram", dram,
                "--ready-file", "{ready}", *extra]
        self.d = Daemon("agent", argv, self.dir).wait_ready()
        self.sock = self.d.sock

    def stop(self):
        st = self.d.stop()
        if st == 0:
            shutil.rmtree(self.dir, ignore_errors=True)
        return st


class Cluster:
    """mc-master and three cluster-mode mc-agents on loopback:
    A (data, dram, domain da), B (client node: --dram 0), C (data, c_dram, domain dc)."""

    def __init__(self, dram="32M", master_extra=(), c_dram=None):
        self.dir = tempfile.mkdtemp(prefix="mc-pycluster-")
        token = secrets.token_hex(16)
        env = dict(os.environ, MC_CLUSTER_TOKEN=token)
        self.master = Daemon("master", [binary("MC_MASTER_BIN"), "--listen", "127.0.0.1:0",
                                        "--ready-file", "{ready}", *master_extra],
                             self.dir, env).wait_ready()
        master = f"127.0.0.1:{self.master.port}"
        self.agents = {}
        c_dram = dram if c_dram is None else c_dram
        for name, dom, mem in (("A", "da", dram), ("B", None, "0"), ("C", "dc", c_dram)):
            argv = [binary("MC_AGENT_BIN"), "--master", master, "--listen", "127.0.0.1:0",
                    "--node", name, "--socket", "{sock}", "--dram", mem, "--ready-file",
                    "{ready}", "--set", "landing=32M", "--set", "prefault=false"]
            if dom:
                argv[7:7] = ["--domain", dom]
            self.agents[name] = Daemon(name, argv, self.dir, env)
        for d in self.agents.values():
            d.wait_ready()

    def sock(self, name):
        return self.agents[name].sock

    def stop(self):
        sts = [d.stop() for d in self.agents.values()] + [self.master.stop()]
        if all(s == 0 for s in sts):
            shutil.rmtree(self.dir, ignore_errors=True)
        return sts


def poll_until(cond, timeout_s=10.0, step=None):
    """Poll cond() (calling step() between polls) until it is true or the deadline passes;
    returns its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        v = cond()
        if v or time.monotonic() >= deadline:
            return v
        if step is not None:
            step()
        else:
            time.sleep(0.01)
