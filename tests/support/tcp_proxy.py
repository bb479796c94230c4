"""A TCP proxy on loopback that a test can cut: every connection through it closed, and new
ones accepted then closed at once, for as long as the outage lasts (a server that went away
and came back, as during a failover). Nothing but the proxy's own sockets is touched."""

from __future__ import annotations

import signal
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class Proxy:
    def __init__(self, target: tuple[str, int], listen: tuple[str, int] = ("127.0.0.1", 0)) -> None:
        self.target = target
        self._server = socket.create_server(listen)
        self.port: int = self._server.getsockname()[1]
        self._up = threading.Event()
        self._up.set()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._closed = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def cut(self, seconds: float) -> None:
        """Drop every connection now and refuse new ones for `seconds`."""
        self._up.clear()
        self._drop_all()
        timer = threading.Timer(seconds, self._up.set)
        timer.daemon = True
        timer.start()

    def close(self) -> None:
        self._closed = True
        with suppress(OSError):
            self._server.close()
        self._drop_all()

    def _drop_all(self) -> None:
        with self._lock:
            sockets, self._sockets = list(self._sockets), set()
        for sock in sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if not self._up.is_set():
                client.close()  # the server is away: the client sees its connection end
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with suppress(OSError):
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    for sock in (source, sink):
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


@contextmanager
def proxy_to(host: str, port: int) -> Iterator[Proxy]:
    proxy = Proxy((host, port))
    try:
        yield proxy
    finally:
        proxy.close()


if __name__ == "__main__":  # python -m tests.support.tcp_proxy LISTEN_HOST PORT TARGET_HOST PORT
    listen_host, listen_port, target_host, target_port = sys.argv[1:5]
    Proxy((target_host, int(target_port)), (listen_host, int(listen_port)))
    print("ready", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
