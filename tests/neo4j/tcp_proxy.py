"""A tiny TCP proxy on 127.0.0.1 that a test can stall and cut, to break a connection mid-sync.

    proxy = TcpProxy(("127.0.0.1", 7687), stall_after=2_000_000)
    proxy.start()                 # proxy.uri -> bolt://127.0.0.1:<port>
    proxy.stalled.wait(60)        # the client has sent 2 MB; nothing more is forwarded
    proxy.cut()                   # every connection closed, new ones refused
"""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpProxy:
    def __init__(self, target: tuple[str, int], stall_after: int | None = None) -> None:
        self.target = target
        self.stall_after = stall_after
        """Client-to-server bytes (over all connections) after which forwarding stops."""
        self.stalled = threading.Event()
        self.sent = 0
        self._cut = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]

    @property
    def uri(self) -> str:
        return f"bolt://127.0.0.1:{self.port}"

    def start(self) -> TcpProxy:
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()
        return self

    def cut(self) -> None:
        """Closes every connection in both directions and stops accepting new ones."""
        self._cut.set()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in [self._listener, *sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._cut.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                client.close()
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False),
                             daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        try:
            while not self._cut.is_set():
                data = source.recv(65536)
                if not data:
                    break
                if counted and self.stall_after is not None:
                    with self._lock:
                        room = max(self.stall_after - self.sent, 0)
                        self.sent += len(data)
                    if room < len(data):
                        sink.sendall(data[:room])
                        self.stalled.set()
                        self._cut.wait()  # hold the connection open, forwarding nothing
                        return
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
