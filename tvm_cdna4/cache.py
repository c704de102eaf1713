"""On-disk build cache: a warm build reads its artifacts instead of running TIRx.

An entry is keyed by everything that determines the artifacts: this package's version, the TIRx
version, a kind (``"cuda-gemm"``, ``"gfx950-gemm"``), the target and every schedule argument
(the caller passes them as a JSON-serializable dict). It holds named byte blobs (the CUDA source
and the exported library, or the gfx950 LLVM IR, assembly and code object).

* Location: ``~/.cache/tvm_cdna4``; the environment variable ``TVM_CDNA4_CACHE_DIR`` moves it.
* Concurrency: an entry is written to a temporary file in the cache directory and renamed over
  the final name (``os.replace``), so a reader sees a whole entry or none; two processes building
  the same entry both write whole files and the last rename wins.
* Integrity: a header names every blob with its length and SHA-256; a truncated, garbled or
  mismatching entry, one without a blob its caller reads (``required``), an entry path that is not a
  regular file (a directory, a fifo) or cannot be read is reported (WARNING) and rebuilt, never used.
  A cache directory that cannot be used (``TVM_CDNA4_CACHE_DIR`` naming a file, no permission) is
  reported once and the builds run without the cache.
* Hits and misses are logged at DEBUG on ``logging.getLogger("tvm_cdna4")``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

LOG = logging.getLogger("tvm_cdna4")
ENV_DIR = "TVM_CDNA4_CACHE_DIR"
MAGIC = b"tvm_cdna4-cache-1\n"


def cache_dir() -> Path:
    """The cache directory (not created here)."""
    env = os.environ.get(ENV_DIR)
    return Path(env) if env else Path.home() / ".cache" / "tvm_cdna4"


@functools.cache
def dist_version(name: str) -> str:
    """The installed version of distribution ``name``, read from the name of its ``.dist-info``
    directory on ``sys.path`` (the installers' standard, PEP 427/491: ``{name}-{version}.dist-info``
    with ``-``/``.`` in the name written ``_``); ``importlib.metadata`` where there is none. Importing
    importlib.metadata alone costs a warm CLI call a third of its time."""
    import re
    import sys

    prefix = re.sub(r"[-_.]+", "_", name).lower() + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for item in names:
            if item.endswith(".dist-info") and item.lower().startswith(prefix):
                return item[len(prefix):-len(".dist-info")]
    from importlib.metadata import version

    return version(name)


_DIGESTS: dict[tuple[str, ...], str] = {}


def source_digest(*patterns: str) -> str:
    """SHA-256 of the package's source files matching ``patterns`` (globs relative to the package,
    e.g. ``"kernels/sm80/*.py"``), once per process: part of a build's key, so that an edited
    schedule or pattern under the same version string (an editable install) never reads a kernel
    cached before the edit."""
    digest = _DIGESTS.get(patterns)
    if digest is None:
        root = Path(__file__).parent
        files = sorted({f for pattern in patterns for f in root.glob(pattern)})
        h = hashlib.sha256()
        for f in files:
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
        digest = _DIGESTS[patterns] = h.hexdigest()
    return digest


def versions() -> dict:
    """The package and TIRx versions every key includes."""
    from . import __version__

    return {"tvm_cdna4": __version__, "apache-tvm-tirx": dist_version("apache-tvm-tirx")}


def entry_key(kind: str, args: dict) -> str:
    """SHA-256 of the kind, the versions and the build arguments (canonical JSON)."""
    text = json.dumps({"kind": kind, "versions": versions(), "args": args}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def entry_path(kind: str, args: dict) -> Path:
    return cache_dir() / f"{kind}-{entry_key(kind, args)}.bin"


def encode(blobs: dict[str, bytes]) -> bytes:
    """The entry file: magic, one JSON header line (name, length, SHA-256 per blob), the blobs."""
    header = [{"name": k, "size": len(v), "sha256": hashlib.sha256(v).hexdigest()} for k, v in blobs.items()]
    return MAGIC + json.dumps(header).encode() + b"\n" + b"".join(blobs.values())


def decode(data: bytes) -> dict[str, bytes]:
    """The blobs of an entry file; ValueError for anything but a whole, unaltered entry."""
    if not data.startswith(MAGIC):
        raise ValueError("bad magic")
    head, sep, body = data[len(MAGIC):].partition(b"\n")
    if not sep:
        raise ValueError("no header")
    try:
        header = json.loads(head)
    except json.JSONDecodeError as err:
        raise ValueError(f"garbled header: {err}") from None
    blobs, offset = {}, 0
    try:
        for item in header:
            name, size, digest = item["name"], int(item["size"]), item["sha256"]
            blob = body[offset : offset + size]
            offset += size
            if len(blob) != size or hashlib.sha256(blob).hexdigest() != digest:
                raise ValueError(f"blob {name!r} is truncated or does not match its checksum")
            blobs[name] = blob
    except (KeyError, TypeError) as err:
        raise ValueError(f"malformed header: {err!r}") from None
    if offset != len(body):
        raise ValueError("trailing bytes after the last blob")
    return blobs


_UNUSABLE: set[str] = set()  # cache directories already reported unusable


def usable_dir(directory: Path) -> bool:
    """Whether the cache directory exists or can be made; the first time one cannot (a file there, no
    permission), a WARNING."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        return True
    except OSError as err:
        _unusable(directory, err)
        return False


def _unusable(directory: Path, why) -> None:
    if str(directory) not in _UNUSABLE:
        _UNUSABLE.add(str(directory))
        LOG.warning("tvm_cdna4 build cache: cannot use the directory %s (%s); building without the cache",
                    directory, why)


def load(path: Path, required: tuple[str, ...] = ()) -> dict[str, bytes] | None:
    """The entry at ``path``, or None (a miss) when it is missing or unusable: not a regular file,
    unreadable, corrupt, or without one of the ``required`` blobs (every such case is logged)."""
    try:
        if not path.is_file():
            if path.exists() or path.is_symlink():
                LOG.warning("tvm_cdna4 build cache: ignoring %s (not a regular file); rebuilding", path)
            elif path.parent.exists() and not path.parent.is_dir():
                _unusable(path.parent, "not a directory")
            return None
        data = path.read_bytes()
    except OSError as err:  # a file as the cache directory, an unreadable entry, ...
        LOG.warning("tvm_cdna4 build cache: cannot read %s (%s); rebuilding", path, err)
        return None
    try:
        blobs = decode(data)
    except ValueError as err:
        LOG.warning("tvm_cdna4 build cache: ignoring corrupt entry %s (%s); rebuilding", path, err)
        return None
    missing = [name for name in required if name not in blobs]
    if missing:
        LOG.warning("tvm_cdna4 build cache: ignoring entry %s without the blobs %s; rebuilding", path, missing)
        return None
    return blobs


def store(path: Path, blobs: dict[str, bytes]) -> None:
    """Write the entry atomically: a temporary file in the same directory, then ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(encode(blobs))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cached(kind: str, args: dict, build: Callable[[], dict[str, bytes]], enabled: bool = True,
           required: tuple[str, ...] = ()) -> dict[str, bytes]:
    """The blobs for ``(kind, args)``: from the cache, or from ``build()`` (then stored).

    ``required``: the blobs the caller reads; an entry without one of them is a miss (``load``).
    Every damaged state of the cache is a miss or a build without the cache, logged, never an error
    of the build. ``enabled=False`` neither reads nor writes the cache."""
    if not enabled or not usable_dir(cache_dir()):
        return build()
    path = entry_path(kind, args)
    blobs = load(path, required)
    if blobs is not None:
        LOG.debug("tvm_cdna4 build cache: hit %s %s", kind, path.name)
        return blobs
    LOG.debug("tvm_cdna4 build cache: miss %s %s", kind, path.name)
    blobs = build()
    try:
        store(path, blobs)
    except OSError as err:  # a read-only or full disk, a directory at the entry's name: costs the cache, not the build
        LOG.warning("tvm_cdna4 build cache: cannot write %s (%s)", path, err)
    return blobs
