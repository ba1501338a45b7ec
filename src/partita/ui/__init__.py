"""partita's web UI and HTTP API (extra ``partita[ui]``): `create_app` builds the ASGI app ``partita ui`` serves."""

from partita.ui.app import create_app
from partita.ui.settings import UiSettings

__all__ = ["UiSettings", "create_app"]
