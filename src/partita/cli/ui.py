"""``partita ui``: serve the web UI and HTTP API over one store (SPEC §16; extra ``partita[ui]``)."""

from __future__ import annotations

import importlib.util
import os

import click
from rich.console import Console
from rich.markup import escape

from partita.cli.common import chosen_store_url, handles_errors, store_option
from partita.errors import ConfigurationError

_NEEDED = ("fastapi", "uvicorn", "jinja2", "multipart")


def _check_extra() -> None:
    missing = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigurationError(
            f"partita ui needs the ui extra ({', '.join(missing)} not installed): pip install 'partita[ui]'"
        )


@click.command("ui")
@click.argument("entry")
@store_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Listen here; beyond loopback needs PARTITA_UI_TOKEN.")
@click.option("--port", type=click.IntRange(0, 65535), default=3000, show_default=True, help="Listen on this port.")
@click.option("--read-only", is_flag=True, help="Hide and refuse every change: no launches, cancels, pauses or events.")
@handles_errors
def ui(entry: str, store_url: str | None, host: str, port: int, read_only: bool) -> None:
    """Serve the web UI and the JSON API (/api/v1) for ENTRY's flows and the store's history."""
    _check_extra()
    import uvicorn

    from partita.ui import UiSettings, create_app
    from partita.ui.settings import TokenSource, default_token_path, resolve_token

    token, source = resolve_token(os.environ, default_token_path())
    settings = UiSettings(
        entry=entry, store_url=chosen_store_url(store_url), token=token, token_source=source,
        host=host, port=port, read_only=read_only,
    )
    app = create_app(settings)
    console = Console(stderr=True)
    shown_host = f"[{host}]" if ":" in host else host
    console.print(f"partita ui: http://{shown_host}:{port}/ over {escape(app.state.context.store.url)}", highlight=False)
    if read_only:
        console.print("read-only: nothing can be changed from this server", highlight=False)
    elif source is TokenSource.ENVIRONMENT:
        console.print("token: the value of PARTITA_UI_TOKEN", highlight=False)
    else:
        made = "generated and saved in" if source is TokenSource.GENERATED else "saved in"
        console.print(f"token (for changes; {made} {default_token_path()}): {token}", highlight=False, soft_wrap=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
