"""Local token estimate with tiktoken, loaded only from a local cache.

These machines cannot download BPE files, so the encoding must come from
``TIKTOKEN_CACHE_DIR`` (or ``CTXSTORE_TIKTOKEN_CACHE_DIR``).  When neither
yields an encoding we fail loudly with the fix, rather than hanging on a
download or silently estimating with a different scheme.  The folder is
read directly (``_load_from``): nothing here writes to ``os.environ``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import types
from typing import Any

from domain.content_blocks import extra_tokens

DEFAULT_ENCODING = "o200k_base"
_chosen: str | None = None  # set by ``configure`` (bootstrap), else read at first use
_folder: str | None = None  # likewise the tiktoken cache folder


def encoding() -> str:
    """The tiktoken encoding in use: ``configure``'s, else ``CTXSTORE_ENCODING``.

    Read when first needed, not at import: ``bootstrap`` configures it from
    ``Settings`` before anything counts.
    """
    global _chosen
    if _chosen is None:
        _chosen = os.environ.get("CTXSTORE_ENCODING", DEFAULT_ENCODING)
    return _chosen


def configure(encoding_name: str, cache_dir: str | None = None) -> None:
    """Count with ``encoding_name``, loaded from ``cache_dir``, from now on (``Settings``)."""
    global _chosen, _folder
    if (encoding_name, cache_dir) != (_chosen, _folder):
        _chosen, _folder = encoding_name, cache_dir
        _encoder.cache_clear()
        count_tokens.cache_clear()


def __getattr__(name: str) -> Any:
    # ``ENCODING`` stays importable, without an import-time environment read.
    if name == "ENCODING":
        return encoding()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class TokenizerUnavailable(RuntimeError):
    pass


def cache_dir() -> str | None:
    """The folder the encoding files are read from, absolute; None leaves it to tiktoken.

    ``TIKTOKEN_CACHE_DIR`` (tiktoken's own variable wins, as it always has),
    else ``configure``'s (``Settings``), else ``CTXSTORE_TIKTOKEN_CACHE_DIR``.
    A relative one (the README's
    ``TIKTOKEN_CACHE_DIR=../shared/tiktoken``) means "from here": it is
    resolved against the working folder when the encoding is first loaded.
    """
    folder = (os.environ.get("TIKTOKEN_CACHE_DIR") or _folder
              or os.environ.get("CTXSTORE_TIKTOKEN_CACHE_DIR"))  # fmt: skip
    return os.path.abspath(folder) if folder else None


def _load_from(folder: str, name: str) -> Any:
    """Encoding ``name`` built from the files cached in ``folder``, never downloaded.

    tiktoken finds its cache through the environment only; rather than write
    ``TIKTOKEN_CACHE_DIR`` into it, this runs tiktoken's own constructor for
    ``name`` with a ``load_tiktoken_bpe`` that reads the file tiktoken would
    have cached (named by the SHA-1 of its URL) from ``folder``, checking its
    hash, so the process environment is left as it was.
    """
    import tiktoken
    from tiktoken.load import check_hash
    from tiktoken_ext import openai_public

    constructor = openai_public.ENCODING_CONSTRUCTORS.get(name)
    if constructor is None:
        raise ValueError(f"unknown encoding {name!r}")

    def load_tiktoken_bpe(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        path = os.path.join(folder, hashlib.sha1(url.encode()).hexdigest())
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} (tiktoken's cache of {url}) does not exist")
        with open(path, "rb") as f:
            data = f.read()
        if expected_hash and not check_hash(data, expected_hash):
            raise ValueError(f"{path} does not hold {url}: its hash differs")
        ranks: dict[bytes, int] = {}
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
        return ranks

    own_globals = {**constructor.__globals__, "load_tiktoken_bpe": load_tiktoken_bpe}
    build = types.FunctionType(constructor.__code__, own_globals, constructor.__name__,
                               constructor.__defaults__, constructor.__closure__)  # fmt: skip
    return tiktoken.Encoding(**build())


@functools.lru_cache(maxsize=1)
def _encoder() -> object:
    folder = cache_dir()
    try:
        if folder is None:  # tiktoken's own default folder (and download)
            import tiktoken

            return tiktoken.get_encoding(encoding())
        return _load_from(folder, encoding())
    except Exception as exc:  # network errors, missing files, bad hashes
        raise TokenizerUnavailable(
            f"could not load the tiktoken encoding {encoding()!r} ({exc.__class__.__name__}: "
            f"{exc}). Set TIKTOKEN_CACHE_DIR to a folder holding the encoding files, "
            "e.g. export TIKTOKEN_CACHE_DIR=../shared/tiktoken"
        ) from exc


@functools.lru_cache(maxsize=65_536)
def count_tokens(text: str) -> int:
    """Tokens in ``text``; deterministic for a given encoding file."""
    if not text:
        return 0
    enc = _encoder()
    core = getattr(enc, "_core_bpe", None)
    if hasattr(core, "encode_to_tiktoken_buffer"):
        # The same tokens as ``encode(text, disallowed_special=())``, left in Rust's
        # buffer: a list of a million Python ints would hold the GIL for tens of ms
        # (every other request's thread waits), and only its length is wanted.
        try:
            buffer = core.encode_to_tiktoken_buffer(text, set())  # type: ignore[union-attr]
        except UnicodeEncodeError:  # lone surrogates: tiktoken's own fix-up, as ``encode``
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            buffer = core.encode_to_tiktoken_buffer(text, set())  # type: ignore[union-attr]
        tokens = memoryview(buffer)
        return tokens.nbytes // tokens.itemsize
    return len(enc.encode(text, disallowed_special=()))  # type: ignore[attr-defined]


def check_tokenizer() -> None:
    """Fail at start-up, not at the first request (and fix a relative folder's meaning)."""
    _encoder()


MESSAGE_OVERHEAD = 4  # role and framing tokens a provider adds per message
TokenCounts = dict[str, Any]


def node_token_counts(text: str, call: str | None, blocks: Any = None) -> TokenCounts:
    """The counts the write side records with a node, naming the encoding they used.

    Counted without the cache: each node's text is counted once, here, and
    the projection reads the recorded numbers instead of counting again.
    ``extra`` is what content blocks add beyond their text (images,
    documents, thinking: ``domain.content_blocks.extra_tokens``).
    """
    count = count_tokens.__wrapped__
    counts: TokenCounts = {"encoding": encoding(), "text": count(text),
                           "call": count(call) if call else 0}  # fmt: skip
    if blocks:
        counts["extra"] = extra_tokens(blocks, count)
    return counts


def blocks_tokens(blocks: Any) -> int:
    """What content blocks cost beyond their text view (0 without blocks)."""
    return extra_tokens(blocks, count_tokens) if blocks else 0


def item_tokens(rendered: str, call: str | None = None, name: str | None = None) -> int:
    """The local estimate of one item as the model is fed it."""
    return (
        MESSAGE_OVERHEAD
        + count_tokens(rendered)
        + (count_tokens(call) if call else 0)
        + (count_tokens(name) if name else 0)
    )


def node_item_tokens(
    counts: TokenCounts | None,
    text: str,
    call: str | None,
    name: str | None,
    blocks: Any = None,
) -> int:
    """``item_tokens`` of a node's own text, from the recorded counts when they apply.

    Counts recorded under another encoding (or none, on events older than
    ``NodeAppended`` v3) are recomputed, so the result is the same either way
    for the same tokenizer; the recorded numbers also keep a rebuild from
    drifting when the tokenizer library changes.
    """
    if counts is None or counts.get("encoding") != encoding():
        return item_tokens(text, call, name) + blocks_tokens(blocks)
    recorded: int = counts["text"] + counts["call"] + counts.get("extra", 0)
    return MESSAGE_OVERHEAD + recorded + (count_tokens(name) if name else 0)
