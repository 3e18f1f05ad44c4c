"""A PyTorch Flight Recorder dump, read safely: bytes in, a :class:`Dump` (its rank's collectives) out.

PyTorch writes one dump per rank, ``PREFIX<rank>`` (``TORCH_FR_DUMP_TEMP_FILE``, formerly
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``): the pickle ``torch._C._distributed_c10d._dump_fr_trace()`` returns —
a dict of ``version``, ``pg_config`` and ``entries``, nothing but dicts, lists, tuples, strings and numbers —
or the same as JSON (``_dump_fr_trace_json()``). :func:`parse_dump` unpickles with an unpickler that refuses
every global (no class, no function: a pickle that would call ``os.system`` is refused before anything
runs), caps the size (:data:`MAX_DUMP_BYTES`) and raises :class:`DumpError` naming the file for anything
that is not a dump. Pure: what a caller read in, a dump out; :mod:`.flight_analysis` compares the ranks'.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The largest dump read (bytes): 20,000 entries with their stack frames take about 20 MiB (bench/flight_recorder.py).
MAX_DUMP_BYTES = 128 << 20
#: A dump written as JSON (``_dump_fr_trace_json()``) starts with an object; a pickle never does.
JSON_START = re.compile(rb"\s*\{")


class DumpError(ValueError):
    """A file that is no Flight Recorder dump (or that is refused): the message names the file and why."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One collective (or point-to-point op) a rank called, as its ring buffer kept it; what only a finding
    needs (sizes, times, the stack) is read from ``raw`` when asked."""

    pg_name: str
    pg_desc: str
    seq: int | None  # collective_seq_id (seq_id before PyTorch 2.4): the same on every rank for one collective
    op: str  # profiling_name: ``nccl:all_reduce``, ``gloo:all_reduce``
    state: str  # scheduled, started or completed
    p2p: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def input_sizes(self) -> tuple[tuple[int, ...], ...]:
        return _sizes(self.raw.get("input_sizes"))

    @property
    def output_sizes(self) -> tuple[tuple[int, ...], ...]:
        return _sizes(self.raw.get("output_sizes"))

    @property
    def created_ns(self) -> int | None:
        return _int(self.raw.get("time_created_ns"))

    @property
    def timeout_ms(self) -> int | None:
        return _int(self.raw.get("timeout_ms"))

    @property
    def call_site(self) -> str | None:
        """The innermost frame outside torch: ``train.py:88 (step)``, where the job called it."""
        return _call_site(self.raw.get("frames"))


@dataclass(frozen=True, slots=True)
class Dump:
    """One rank's dump: its entries, oldest first, and the process groups it knows (name → (desc, ranks))."""

    rank: int
    source: str
    version: str
    entries: tuple[Entry, ...]
    groups: Mapping[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)


class _DumpUnpickler(pickle.Unpickler):
    """Builds only what pickle's own opcodes make (dict, list, tuple, str, bytes, int, float, bool, None, set):
    every class or function a pickle names is refused, so nothing in it can run."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"it names {module}.{name}; a dump holds only plain data, so it was refused")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("it holds a persistent reference; refused")


def rank_of(path: str, prefix: str) -> int | None:
    """The rank a dump file of ``prefix`` is of (``/fr/rank_3`` of ``rank_`` → 3), or None when it is not one."""
    name = path.rsplit("/", 1)[-1]
    base = prefix.rsplit("/", 1)[-1]
    if not name.startswith(base):
        return None
    rest = name[len(base) :]
    return int(rest) if rest.isdigit() else None


def load(data: bytes, source: str) -> Mapping[str, Any]:
    """A dump's raw dict, from pickle or JSON bytes; :class:`DumpError` names ``source`` for anything else."""
    if len(data) > MAX_DUMP_BYTES:
        raise DumpError(f"{source}: {len(data)} bytes, more than a dump's {MAX_DUMP_BYTES} (not read)")
    if not data:
        raise DumpError(f"{source}: empty, not a Flight Recorder dump")
    try:
        raw = json.loads(data) if JSON_START.match(data) else _DumpUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError as exc:
        raise DumpError(f"{source}: not a Flight Recorder dump: {exc}") from None
    except EOFError:
        raise DumpError(f"{source}: truncated, not a whole Flight Recorder dump") from None
    except (ValueError, TypeError, AttributeError, IndexError, KeyError, MemoryError, RecursionError) as exc:
        raise DumpError(f"{source}: not a Flight Recorder dump ({type(exc).__name__}: {exc})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("entries", []), list):
        raise DumpError(f"{source}: not a Flight Recorder dump (no dict with a list of entries)")
    return raw


def parse_dump(data: bytes, source: str, rank: int) -> Dump:
    """``rank``'s dump from the bytes of its file ``source`` (see the module docstring)."""
    raw = load(data, source)
    entries = []
    for i, item in enumerate(raw.get("entries", [])):
        if not isinstance(item, dict):
            raise DumpError(f"{source}: entry {i} is not a dict")
        entries.append(_entry(item))
    version = raw.get("version")
    return Dump(rank, source, str(version) if version is not None else "", tuple(entries), _groups(raw))


def _entry(item: Mapping[str, Any]) -> Entry:
    pg = item.get("process_group")
    pg_name, pg_desc = (str(pg[0]), str(pg[1])) if isinstance(pg, (list, tuple)) and len(pg) >= 2 else ("", "")
    seq = item.get("collective_seq_id", item.get("seq_id"))
    op = str(item.get("profiling_name") or "")
    p2p = item.get("is_p2p")
    if not isinstance(p2p, bool):
        p2p = any(word in op for word in ("send", "recv"))
    return Entry(
        pg_name,
        pg_desc,
        seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
        op,
        str(item.get("state") or ""),
        p2p,
        item,
    )


def _groups(raw: Mapping[str, Any]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``pg_config``: each group's description and global ranks, by its name (the key, and its ``name``)."""
    config = raw.get("pg_config")
    groups: dict[str, tuple[str, tuple[int, ...]]] = {}
    if not isinstance(config, dict):
        return groups
    for key, value in config.items():
        if not isinstance(value, dict):
            continue
        ranks = value.get("ranks")
        if isinstance(ranks, str):
            ranks = [int(n) for n in re.findall(r"\d+", ranks)]
        if not isinstance(ranks, (list, tuple)) or not all(isinstance(r, int) for r in ranks):
            continue
        group = (str(value.get("desc") or ""), tuple(sorted(set(ranks))))
        for name in {str(key), str(value.get("name") or key)}:
            groups.setdefault(name, group)
    return groups


def _sizes(value: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(tuple(d for d in s if isinstance(d, int)) for s in value if isinstance(s, (list, tuple)))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _call_site(frames: Any) -> str | None:
    """The innermost frame outside torch (frames are innermost first): where the job called the collective."""
    if not isinstance(frames, list):
        return None
    for frame in frames:
        if not isinstance(frame, dict):
            continue
        filename = str(frame.get("filename") or "")
        if filename and "/torch/" not in filename and not filename.startswith("<"):
            return f"{filename}:{frame.get('line')} ({frame.get('name')})"
    return None
