"""Running input against the server, shared by the shell and ``dsms run``: statements go one at a time (a
bare query to ``POST /queries``, everything else to ``POST /cql``), outcomes and errors are printed, and the
first error stops the rest of the input."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from dsms.client.follow import follow
from dsms.client.http import DsmsClient, ServerError, Unreachable
from dsms.client.render import print_error, render_result
from dsms.client.statements import is_bare_query, split_statements


def connect(console: Console, url: str, token: str | None, hint: str = "") -> DsmsClient | None:
    """A client for ``url`` once the server answers (any answer, even an error, means it is there); None,
    with the reason printed, when it cannot be reached."""
    client = DsmsClient(url, token)
    try:
        client.get("/system")
    except Unreachable as e:
        console.print(Text(f"dsms: {e}{hint}", style="bold red"))
        return None
    except ServerError:
        pass
    return client


def execute_text(console: Console, client: DsmsClient, text: str, *, source_name: str | None = None,
                 interactive: bool = True) -> bool:
    """Run every statement of ``text``; False at the first that fails (the ones before it stay applied).
    A bare query is registered anonymously (``POST /queries``: ``/cql`` refuses them) and, in the shell,
    followed as a live table."""
    for stmt in split_statements(text):
        try:
            if is_bare_query(stmt.text):
                q = client.register_query(stmt.text)
                render_result(console, q)
                if interactive:
                    follow(console, client, q["id"], q["id"], q["kind"], q["schema"])
            else:
                for r in client.cql(stmt.text):
                    render_result(console, r)
        except ServerError as e:
            print_error(console, e, stmt, text, source_name)
            return False
        except Unreachable as e:
            console.print(Text(str(e), style="bold red"))
            return False
    return True
