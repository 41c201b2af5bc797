"""Is anything listening at the bootstrap addresses? Asked once, before a command's first client.

A Kafka client given a wrong ``--bootstrap-server`` does not give up when the
connection is refused: librdkafka reconnects with a backoff until the request
times out (30 s by default), and a command that makes several requests waits
that long for each. A refused connection is an answer, though, and an operator
who mistyped a port wants it at once. ``unreachable(bootstrap, timeout)`` opens
a TCP connection to every bootstrap address at once (each of its resolved IP
addresses in turn) and answers:

* ``None`` as soon as one address accepts (the clients then do the real work,
  within their own timeout);
* a sentence as soon as every address has failed: refused, no route, or a name
  that does not resolve;
* a sentence when ``timeout`` passes with an address still silent (a firewall
  that drops packets): the same wait a client would have made, never longer.

Nothing is sent on a connection it opens (it is closed at once), so it needs no
credentials and changes nothing on the cluster.
"""

from __future__ import annotations

import queue
import socket
import threading
import time

REFUSED, SILENT, OPEN = "refused", "silent", "open"


def addresses(bootstrap: str) -> list[tuple[str, int]]:
    """``HOST:PORT[,HOST:PORT]`` as (host, port) pairs; IPv6 hosts may be bracketed (``[::1]:9092``).
    An entry without a port is left to the client (it names the problem)."""
    out = []
    for item in bootstrap.split(","):
        item = item.strip()
        if "://" in item:  # a listener name (PLAINTEXT://host:port), as some configs write it
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            continue
        out.append((host.strip("[]"), int(port)))
    return out


def _try(host: str, port: int, deadline: float) -> tuple[str, str]:
    """(OPEN | REFUSED | SILENT, what happened) for one bootstrap address."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        return REFUSED, f"{host}:{port}: the name does not resolve ({e.strerror})"
    except OSError as e:
        return REFUSED, f"{host}:{port}: {e.strerror or e}"
    reasons = []
    for family, kind, proto, _name, sockaddr in infos:
        left = deadline - time.monotonic()
        if left <= 0:
            return SILENT, f"{host}:{port}: no answer"
        s = None
        try:  # a family this host cannot open (IPv6 disabled) fails here, and is one more reason
            s = socket.socket(family, kind, proto)
            s.settimeout(left)
            s.connect(sockaddr)
            return OPEN, f"{host}:{port}: open"
        except socket.timeout:
            return SILENT, f"{host}:{port}: no answer"
        except OSError as e:
            reasons.append(e.strerror or str(e))
        finally:
            if s is not None:
                s.close()
    return REFUSED, f"{host}:{port}: {', '.join(dict.fromkeys(reasons)) or 'no address'}"


def unreachable(bootstrap: str | None, timeout: float, what: str = "the cluster",
                addresses_are: str = "bootstrap address") -> str | None:
    """Why nothing can be reached at ``bootstrap`` (see the module doc), or ``None``. ``what`` and
    ``addresses_are`` name what is asked for in the sentence."""
    targets = addresses(bootstrap or "")
    if not targets:
        return None
    deadline = time.monotonic() + timeout
    answers: queue.Queue = queue.Queue()
    for host, port in targets:  # daemon threads: one still connecting never holds the command's exit
        threading.Thread(target=lambda h=host, p=port: answers.put(_try(h, p, deadline)), daemon=True,
                         name=f"reach {host}:{port}").start()
    failed: list[str] = []
    while len(failed) < len(targets):
        try:
            kind, outcome = answers.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return f"cannot reach {what} at {bootstrap}: no answer within {timeout:g} s (--timeout)"
        if kind == OPEN:
            return None
        if kind == SILENT:
            return f"cannot reach {what} at {bootstrap}: no answer within {timeout:g} s (--timeout)"
        failed.append(outcome)
    return f"cannot reach {what} at {bootstrap}: no {addresses_are} accepts a connection ({'; '.join(failed)})"
