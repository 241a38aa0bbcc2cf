"""Runs a command on its own pseudo-terminal as a session leader, like a shell in a terminal window.

Copies what it writes to stdout. SIGUSR1 closes the terminal (as tmux kill-session or a closed SSH
connection do): the kernel hangs it up and sends SIGHUP to the command. Exits with the command's
exit code, or 128 + the signal that killed it.
"""
import os
import pty
import select
import signal
import sys

pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])

closing = False


def close_terminal(*_):
    global closing
    closing = True


signal.signal(signal.SIGUSR1, close_terminal)
while not closing:
    try:
        ready, _, _ = select.select([fd], [], [], 0.1)
    except InterruptedError:
        continue
    if not ready:
        continue
    try:
        data = os.read(fd, 65536)
    except OSError:
        break
    if not data:
        break
    sys.stdout.buffer.write(data.replace(b"\r\n", b"\n"))
    sys.stdout.flush()
os.close(fd)
_, status = os.waitpid(pid, 0)
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
