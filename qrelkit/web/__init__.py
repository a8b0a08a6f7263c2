"""The assessor web app (docs/web.md): ``qrelkit serve DIR`` serves a campaign to its assessors
and organizers in the browser. A roof beside :mod:`qrelkit.cli`: it imports the campaign package
and its store, and nothing imports it but the ``serve`` command. Its packages (Starlette,
uvicorn, Jinja2, itsdangerous) are the optional extra ``qrelkit[web]``.

>>> from qrelkit.web import create_app, run_server   # doctest: +SKIP
>>> app = create_app("camp")                          # doctest: +SKIP
>>> run_server(app, host="127.0.0.1", port=8765)      # doctest: +SKIP
"""

from qrelkit.web.app import create_app, exposure_warning, run_server
from qrelkit.web.service import GRADE_NAMES, CampaignService, WebError
from qrelkit.web.worker import Advancer, ProcessAdvance, RunnerAdvance, advance_campaign

__all__ = ["Advancer", "CampaignService", "GRADE_NAMES", "ProcessAdvance", "RunnerAdvance", "WebError", "advance_campaign", "create_app", "exposure_warning",
           "run_server"]
