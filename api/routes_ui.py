"""The context inspector: static files under ``/ui``, committed as they are served.

No build step: ``api/ui/`` holds plain HTML, CSS and JavaScript that read
the JSON API from the browser.  Only the files listed here are served, so a
path can never reach outside the folder.  The routes stay out of the OpenAPI
document, which describes the JSON API.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import Route

from domain.errors import NotFound

FOLDER = Path(__file__).resolve().parent / "ui"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}  # fmt: skip
FILES = {p.name: p for p in FOLDER.iterdir() if p.suffix in TYPES} if FOLDER.is_dir() else {}
# The page and its scripts change with the server: always revalidate.
HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}


def _file(name: str) -> Response:
    path = FILES.get(name)
    if path is None:
        raise NotFound(f"no inspector file {name!r}")
    return FileResponse(path, media_type=TYPES[path.suffix], headers=HEADERS)


async def page(request: Request) -> Response:
    return _file("index.html")


async def asset(request: Request) -> Response:
    return _file(request.path_params["name"])


async def slash(request: Request) -> Response:
    return RedirectResponse("/ui", status_code=308)


ROUTES = [
    Route("/ui", page, methods=["GET", "HEAD"]),
    Route("/ui/", slash, methods=["GET", "HEAD"]),
    Route("/ui/{name}", asset, methods=["GET", "HEAD"]),
]
