"""A real browser's EventSource over a network that drops: Chromium reads a query's results as server-sent
events through a TCP relay that the test cuts; the browser reconnects by itself with Last-Event-ID and ends
up with every element exactly once (issue 17, docs/http-api.md "Element ids and resuming")."""

from __future__ import annotations

import socket
import threading

from httpkit import Server, free_port
from httpkit import wait_for as wait
from playwright.sync_api import sync_playwright


class Relay:
    """Forwards TCP connections from its own port to the server's; ``cut()`` breaks every open one, as a
    network failure would, and new connections go through again."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        with self.lock:
            conns, self.open = self.open, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.listener.close()
        self.cut()


def test_browser_eventsource_resumes_after_the_connection_drops(server: Server, uniq: str) -> None:
    s = uniq
    server.cql(f"REGISTER STREAM {s} (item INT, price FLOAT); REGISTER QUERY {s}_q AS SELECT item, price FROM {s}")
    first = [{"ts": t, "row": {"item": t, "price": t * 1.5}} for t in range(1, 5)]
    later = [{"ts": t, "row": {"item": t, "price": t * 1.5}} for t in range(5, 9)]
    assert server.ndjson(s, first).status == 200
    relay = Relay(server.port)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{relay.port}/openapi.json")          # any page of the server's origin
            page.evaluate("""url => {
                window.got = []; window.opens = 0;
                const es = new EventSource(url);
                es.onopen = () => { window.opens += 1; };
                es.onmessage = e => { window.got.push({id: e.lastEventId, data: JSON.parse(e.data)}); };
            }""", f"/queries/{s}_q/results?from=0")
            wait(lambda: len(page.evaluate("window.got")) == 4, what="the first four elements")
            relay.cut()                                                          # the network goes
            assert server.ndjson(s, later).status == 200
            wait(lambda: len(page.evaluate("window.got")) >= 8, timeout=30, what="the browser reconnected")
            got = page.evaluate("window.got")
            opens = page.evaluate("window.opens")
            browser.close()
    finally:
        relay.close()
    assert opens >= 2                                                            # it did reconnect
    rows = [e for e in got if "row" in e["data"]]
    assert [e["id"] for e in rows] == [str(i) for i in range(1, 9)]              # each element once, in order
    assert [e["data"]["row"] for e in rows] == [x["row"] for x in first + later]
