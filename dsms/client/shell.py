"""``dsms shell``: an interactive CQL prompt against a running server (prompt_toolkit: history, multi-line
statements that run when they end with ``;``, tab completion of the server's names; rich: result tables)."""

from __future__ import annotations

import os
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from rich.console import Console
from rich.text import Text

from dsms.client.completion import CatalogCompleter
from dsms.client.follow import follow
from dsms.client.http import DsmsClient, ServerError, Unreachable
from dsms.client.session import connect, execute_text
from dsms.client.statements import is_complete

HELP = """\
Statements end with ';' and may span lines (Enter before the ';' starts a new line). Tab completes names.
  REGISTER STREAM s (a INT, b FLOAT);      REGISTER RELATION r (k INT, v STRING);
  REGISTER QUERY q AS SELECT ...;          REGISTER VIEW v AS SELECT ...;
  SELECT ...;                              register the query (anonymous) and follow its results
  SHOW STREAMS | RELATIONS | VIEWS | QUERIES;
  DESCRIBE name;                           columns of a stream, relation, view or query
  EXPLAIN SELECT ...;  EXPLAIN name;       the plan (a SELECT is not registered)
  DROP QUERY | VIEW | STREAM | RELATION name;
Commands:
  \\follow name     show a query's results as a live table (Ctrl-C stops following; the query keeps running)
  \\help            this text
  \\quit, \\q        leave (Ctrl-D too)
Docs: docs/shell.md and docs/cql.md."""


def history_path() -> Path | None:
    """``DSMS_HISTORY``, else ``~/.dsms_history``; None (history kept in memory only) when there is no home."""
    path = os.environ.get("DSMS_HISTORY")
    if path:
        return Path(path)
    home = Path(os.path.expanduser("~"))
    return home / ".dsms_history" if home.is_dir() else None


def _key_bindings() -> KeyBindings:
    kb = KeyBindings()

    @kb.add("enter")
    def _(event) -> None:
        """Run the input when it is complete (ends with ';', or is a command); else start another line."""
        buf = event.current_buffer
        if buf.complete_state is not None and buf.complete_state.current_completion is not None:
            buf.apply_completion(buf.complete_state.current_completion)
        elif is_complete(buf.text):
            buf.validate_and_handle()
        else:
            buf.insert_text("\n")
    return kb


def command(console: Console, client: DsmsClient, text: str) -> bool:
    """A backslash command; False to leave the shell."""
    word, _, arg = text.strip().partition(" ")
    arg = arg.strip().rstrip(";").strip()
    if word in ("\\q", "\\quit"):
        return False
    if word in ("\\help", "\\h", "\\?"):
        console.print(Text(HELP))
    elif word == "\\follow":
        if not arg:
            console.print(Text("\\follow needs a query name or id: \\follow busy", style="bold red"))
            return True
        try:
            q = client.query(arg)
        except (ServerError, Unreachable) as e:
            console.print(Text(str(e), style="bold red"))
            return True
        follow(console, client, q["id"], q["name"] or q["id"], q["kind"], q["schema"])
    else:
        console.print(Text(f"unknown command {word}; \\help lists them", style="bold red"))
    return True


def run_shell(url: str, token: str | None) -> int:
    """The prompt loop; returns the exit status (2 when the server cannot be reached at start)."""
    console = Console(highlight=False)
    client = connect(console, url, token, " (start one with `dsms serve`, or give --url)")
    if client is None:
        return 2
    completer = CatalogCompleter(client)
    completer.refresh()
    path = history_path()
    session: PromptSession = PromptSession(
        history=FileHistory(str(path)) if path is not None else InMemoryHistory(),
        completer=completer, complete_while_typing=False, multiline=True, key_bindings=_key_bindings(),
        prompt_continuation=lambda width, line_number, wrap_count: "...> ".rjust(width))
    console.print(Text(f"dsms shell on {client.url}: statements end with ';', \\help for help, \\q to leave"))
    while True:
        try:
            text = session.prompt("dsms> ")
        except KeyboardInterrupt:
            continue                      # Ctrl-C at the prompt drops the line, as in psql
        except EOFError:
            break
        if not text.strip():
            continue
        if text.strip().startswith("\\"):
            if not command(console, client, text):
                break
            continue
        execute_text(console, client, text)
        completer.refresh()
    return 0
