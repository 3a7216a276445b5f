"""``dsms run FILE.cql``: the statements of a file (or of standard input, ``-``) run against a server in order,
as the shell would run them but without a prompt and without following results; the first error stops the run
and is reported as ``FILE:line:column`` with the line and a caret."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

from dsms.client.session import connect, execute_text


def run_file(path: str, url: str, token: str | None) -> int:
    """Exit status: 0 when every statement ran, 1 at the first refused, 2 when the file cannot be read or the
    server cannot be reached."""
    console = Console(highlight=False)
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8-sig").read()
    except OSError as e:
        console.print(Text(f"dsms: cannot read {path}: {e.strerror or e}", style="bold red"))
        return 2
    except UnicodeDecodeError:
        console.print(Text(f"dsms: {path} is not UTF-8 text", style="bold red"))
        return 2
    client = connect(console, url, token)
    if client is None:
        return 2
    ok = execute_text(console, client, text, source_name="<stdin>" if path == "-" else path, interactive=False)
    return 0 if ok else 1
