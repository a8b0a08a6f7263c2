"""``qrelkit serve DIR``: the assessor web app over a campaign (docs/web.md) — a thin roof over
:func:`qrelkit.web.serve`."""

from __future__ import annotations

from pathlib import Path

import typer

from qrelkit.cli import common
from qrelkit.errors import InputError


def command(
    directory: Path = typer.Argument(..., help="The campaign folder (holds campaign.db)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback by default; put a reverse proxy "
                             "in front to serve others)."),
    port: int = typer.Option(8765, "--port", help="Port to listen on.", min=1, max=65535),
    proxy_headers: bool = typer.Option(False, "--proxy-headers", help="Behind a reverse proxy: trust its "
                                       "X-Forwarded-Proto and X-Forwarded-For (https: Secure cookies)."),
    forwarded_allow_ips: str = typer.Option("127.0.0.1", "--forwarded-allow-ips", help="With --proxy-headers: the "
                                            "proxies' addresses, comma-separated ('*': any)."),
) -> None:
    """Serve the campaign to its assessors in the browser: topic picker, one passage at a time,
    the next batch computed in the background; organizer views (status, agreement, report,
    qrels). Accounts: 'qrelkit campaign assessor add'. Stops with Ctrl-C."""
    common.check_io(stores=[Path(directory) / "campaign.db"])
    try:
        from qrelkit import web  # lazy: the server's packages are the optional extra qrelkit[web]
    except ImportError as exc:
        raise InputError("missing-dependency", f"the web app needs the optional extra: pip install 'qrelkit[web]' "
                         f"({exc.name} is missing)") from None
    app_ = web.create_app(directory)
    warning = web.exposure_warning(host)
    if warning:
        common.stderr.print(warning, markup=False, highlight=False)
    common.stderr.print(f"serving {directory} on http://{host}:{port} (Ctrl-C stops)", markup=False, highlight=False)
    web.run_server(app_, host=host, port=port, proxy_headers=proxy_headers, forwarded_allow_ips=forwarded_allow_ips)
