"""Starting `purgatory serve` from a script: every listener on a port the kernel picks,
the bound addresses read from the broker's ready file.

`purgatory serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --ready-file PATH` writes
PATH (whole, by a rename) once every listener serves, as one JSON object:
`{"brokers": [{"id", "listener", "advertised"}], "bootstrap", "admin"}`. The benches start
the builds they compare this way, so a build older than `--ready-file` cannot be one of
them. The reference Kafka is the exception: it needs its ports chosen up front
(`free_port_run.py`).
"""

import itertools
import json
import os
import subprocess
import tempfile
import time

_launched = itertools.count(1)


def serve(binary, args, log, cwd=None, env=None, wrap=lambda cmd: cmd, timeout=30):
    """Starts `binary serve ARGS` on port 0 with a ready file, `wrap` applied to the
    command (for `taskset`), stdout and stderr to the file object `log` (or DEVNULL).
    Returns `(process, ready)`, `ready` being the ready file's JSON. Raises RuntimeError
    if the process stops or the file does not appear within `timeout` seconds."""
    ready_file = os.path.join(tempfile.gettempdir(),
                              f"purgatory-ready-{os.getpid()}-{next(_launched)}.json")
    cmd = [binary, "serve", *args,
           "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--ready-file", ready_file]
    proc = subprocess.Popen(wrap(cmd), stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env)
    deadline = time.time() + timeout
    while not os.path.exists(ready_file):
        if proc.poll() is not None:
            raise RuntimeError(f"{binary} stopped before it was ready (exit {proc.returncode})")
        if time.time() > deadline:
            proc.kill()
            raise RuntimeError(f"{binary} did not write its ready file within {timeout} s")
        time.sleep(0.02)
    with open(ready_file) as f:
        ready = json.load(f)
    os.remove(ready_file)
    return proc, ready
