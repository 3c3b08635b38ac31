"""Prints the first of N consecutive free loopback ports (for scripts/kafka-reference.sh).

Each candidate run is bound whole before it is printed, so none of its ports is in use at
that moment; the range chosen from is below the kernel's ephemeral range (32768+), so
outgoing connections do not take one meanwhile.
"""

import random
import socket
import sys


def free_run(n: int) -> int:
    for _ in range(200):
        base = random.randrange(20000, 32000 - n)
        sockets = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise SystemExit("no run of free ports found")


if __name__ == "__main__":
    print(free_run(int(sys.argv[1]) if len(sys.argv) > 1 else 4))
