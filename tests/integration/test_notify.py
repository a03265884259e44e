#!/usr/bin/env python3
"""The daemons' service-manager notifications (systemd's Type=notify protocol).

mc-agent (standalone) and mc-master each start with NOTIFY_SOCKET naming a unix datagram
socket of this test: READY=1 must arrive, and only once the ready file is there; SIGTERM
must bring STOPPING=1, then a clean exit (0). An agent whose NOTIFY_SOCKET leads nowhere
still serves and stops cleanly (a warning in its log, nothing else).

Needs MC_AGENT_BIN and MC_MASTER_BIN (meson sets them); MC_HAVE_SYSTEMD=0 (a build
without libsystemd, whose daemons notify nobody) and missing variables exit 77 (SKIP).
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

DEADLINE_S = 20.0
failures = 0


def check(what, ok, detail=''):
    global failures
    if ok:
        print('ok: ' + what)
    else:
        failures += 1
        print('FAIL: ' + what + (': ' + detail if detail else ''), file=sys.stderr)


def recv_until(sock, proc, want, deadline):
    """Datagrams until one holds the line `want` (returned with everything seen at that
    moment), the process exits, or the deadline passes (None)."""
    while time.monotonic() < deadline:
        sock.settimeout(0.05)
        try:
            msg = sock.recv(4096).decode(errors='replace')
        except socket.timeout:
            if proc.poll() is not None:
                sock.settimeout(0)
                try:  # a last message may have been sent just before the exit
                    msg = sock.recv(4096).decode(errors='replace')
                except (BlockingIOError, socket.timeout):
                    return None
            else:
                continue
        if want in msg.split('\n'):
            return msg
    return None


def stop(proc):
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def run_daemon(name, argv, env, tmp):
    """Start argv with NOTIFY_SOCKET; check READY=1 after the ready file, STOPPING=1 on
    SIGTERM, exit 0."""
    path = os.path.join(tmp, name + '.notify')
    ready = os.path.join(tmp, name + '.ready')
    log = open(os.path.join(tmp, name + '.log'), 'w+')
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    env = dict(env, NOTIFY_SOCKET=path)
    proc = subprocess.Popen(argv + ['--ready-file', ready], env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        msg = recv_until(sock, proc, 'READY=1', time.monotonic() + DEADLINE_S)
        file_there = os.path.exists(ready)
        check(name + ': READY=1 arrives', msg is not None)
        check(name + ': ... once the ready file is there', msg is None or file_there)
        check(name + ': ... with a STATUS line', msg is None or 'STATUS=' in msg)
        if msg is None:
            return
        proc.send_signal(signal.SIGTERM)
        msg = recv_until(sock, proc, 'STOPPING=1', time.monotonic() + DEADLINE_S)
        check(name + ': STOPPING=1 on SIGTERM', msg is not None)
        try:
            rc = proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            rc = None
        check(name + ': exits 0 after SIGTERM', rc == 0, 'exit status %s' % rc)
        check(name + ': the ready file is gone', not os.path.exists(ready))
    finally:
        stop(proc)
        sock.close()
        if failures:
            log.seek(0)
            sys.stderr.write('== %s log\n%s' % (name, log.read()[-4000:]))
        log.close()


def main():
    agent = os.environ.get('MC_AGENT_BIN')
    master = os.environ.get('MC_MASTER_BIN')
    if not agent or not master:
        print('MC_AGENT_BIN or MC_MASTER_BIN not set: skipping', file=sys.stderr)
        return 77
    if os.environ.get('MC_HAVE_SYSTEMD') != '1':
        print('built without libsystemd: the daemons notify nobody; skipping', file=sys.stderr)
        return 77
    tmp = tempfile.mkdtemp(prefix='mc-notify-', dir='/tmp')
    try:
        env = dict(os.environ)
        run_daemon('agent', [agent, '--standalone', '--socket', os.path.join(tmp, 'a.sock'),
                             '--dram', '64M'], env, tmp)
        run_daemon('master', [master, '--listen', '127.0.0.1:0'],
                   dict(env, MC_CLUSTER_TOKEN='notify-test-token'), tmp)

        # a NOTIFY_SOCKET that leads nowhere: the agent serves and stops as ever
        ready = os.path.join(tmp, 'lost.ready')
        with open(os.path.join(tmp, 'lost.log'), 'w+') as log:
            proc = subprocess.Popen(
                [agent, '--standalone', '--socket', os.path.join(tmp, 'b.sock'), '--dram',
                 '64M', '--ready-file', ready],
                env=dict(env, NOTIFY_SOCKET=os.path.join(tmp, 'nobody')), stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + DEADLINE_S
                while (not os.path.exists(ready) and proc.poll() is None
                       and time.monotonic() < deadline):
                    time.sleep(0.01)
                check('no listener: the agent still gets ready', os.path.exists(ready))
                proc.send_signal(signal.SIGTERM)
                try:
                    rc = proc.wait(timeout=DEADLINE_S)
                except subprocess.TimeoutExpired:
                    rc = None
                check('no listener: exits 0 after SIGTERM', rc == 0, 'exit status %s' % rc)
                log.seek(0)
                text = log.read()
                check('no listener: one warning says so',
                      text.count('cannot notify the service manager') == 1, text[-2000:])
            finally:
                stop(proc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
