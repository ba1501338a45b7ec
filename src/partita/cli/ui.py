"""``partita ui``: serve the web UI and HTTP API over one store (SPEC §16; extra ``partita[ui]``).

The listening socket is bound here, before uvicorn starts, so that a port in
use is a clear usage error (exit 2) and ``--port 0`` prints the port it got.
SIGINT and SIGTERM stop the server as they stop ``partita serve``: requests
in flight finish, runs launched from the UI are cancelled as Ctrl-C cancels
``partita run`` (and recorded ``cancelled``), and the command exits 0.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from partita.cli.common import EXIT_INTERRUPTED, chosen_store_url, handles_errors, store_option
from partita.errors import ConfigurationError

_NEEDED = ("fastapi", "uvicorn", "jinja2", "multipart")
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _check_extra() -> None:
    missing = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigurationError(
            f"partita ui needs the ui extra ({', '.join(missing)} not installed): pip install 'partita[ui]'"
        )


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, or a ConfigurationError that says why the address cannot be used."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror:
        raise ConfigurationError(f"--host {host} is not an address or a host name this machine can resolve") from None
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
    except OSError as error:
        listener.close()
        reason = {
            errno.EADDRINUSE: "the address is already in use (another server listens there); choose another --port",
            errno.EACCES: "permission denied (ports below 1024 need privileges); choose another --port",
            errno.EADDRNOTAVAIL: "this machine has no such address; choose another --host",
        }.get(error.errno or 0, f"{error.strerror}")
        raise ConfigurationError(f"cannot listen on {host} port {port}: {reason}") from None
    listener.set_inheritable(True)
    return listener


def _server_class() -> type[Any]:
    from partita.ui.serving import UiServer

    class StoppableServer(UiServer):  # type: ignore[misc]
        """Stops on SIGINT or SIGTERM and returns, instead of re-raising the signal once stopped."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            originals = {number: signal.signal(number, self.handle_exit) for number in _STOP_SIGNALS}
            try:
                yield
            finally:
                for number, handler in originals.items():
                    signal.signal(number, handler)

    return StoppableServer


@click.command("ui")
@click.argument("entry")
@store_option
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Listen here; beyond loopback needs PARTITA_UI_TOKEN."
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=3000,
    show_default=True,
    help="Listen on this port (0: any free port).",
)
@click.option("--read-only", is_flag=True, help="Hide and refuse every change: no launches, cancels, pauses or events.")
@handles_errors
def ui(entry: str, store_url: str | None, host: str, port: int, read_only: bool) -> None:
    """Serve the web UI and the JSON API (/api/v1) for ENTRY's flows and the store's history.

    The store is created if it does not exist yet. SIGINT or SIGTERM stops
    the server: runs launched from it are cancelled, and it exits 0.
    """
    _check_extra()
    console = Console(stderr=True)
    try:
        app, listener = _start(entry, store_url, host, port, read_only, console)
        _serve(app, listener, host)
    except KeyboardInterrupt:  # Ctrl-C before the server took over SIGINT: nothing was served yet
        console.print("partita ui: interrupted while starting", highlight=False)
        sys.exit(EXIT_INTERRUPTED)
    cancelled = app.state.launcher.cancelled_at_shutdown
    noun = "run" if cancelled == 1 else "runs"
    console.print(f"partita ui: stopped ({cancelled} {noun} launched here cancelled)", highlight=False)


def _start(
    entry: str, store_url: str | None, host: str, port: int, read_only: bool, console: Console
) -> tuple[Any, socket.socket]:
    """The app (entry loaded, store opened or created) and its bound socket; where it listens, printed."""
    from partita.ui import UiSettings, create_app
    from partita.ui.settings import TOKEN_ENVIRONMENT, TokenSource, check_exposure, default_token_path, resolve_token

    # Refused before a token file is written: exposing the server needs the token from the environment.
    check_exposure(host, TokenSource.ENVIRONMENT if os.environ.get(TOKEN_ENVIRONMENT) else None)
    token, source = resolve_token(os.environ, default_token_path())
    settings = UiSettings(
        entry=entry, store_url=chosen_store_url(store_url), token=token, token_source=source,
        host=host, port=port, read_only=read_only,
    )  # fmt: skip
    app = create_app(settings)
    listener = _bind(host, port)
    shown_host = f"[{host}]" if ":" in host else host
    where = f"http://{shown_host}:{listener.getsockname()[1]}/"
    console.print(f"partita ui: {where} over {escape(app.state.context.store.url)}", highlight=False)
    if read_only:
        console.print("read-only: nothing can be changed from this server", highlight=False)
    elif source is TokenSource.ENVIRONMENT:
        console.print("token: the value of PARTITA_UI_TOKEN", highlight=False)
    else:
        made = "generated and saved in" if source is TokenSource.GENERATED else "saved in"
        console.print(f"token (for changes; {made} {default_token_path()}): {token}", highlight=False, soft_wrap=True)
    return app, listener


def _serve(app: Any, listener: socket.socket, host: str) -> None:
    """Serve on ``listener`` until SIGINT or SIGTERM; the app's shutdown cancels the runs it launched."""
    import uvicorn

    port = listener.getsockname()[1]
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    try:
        _server_class()(config).run(sockets=[listener])
    finally:
        listener.close()
