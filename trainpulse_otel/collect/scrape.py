"""``-scrape``: GPU and InfiniBand samples from dcgm-exporter and node-exporter targets over HTTP.

:func:`fetch` reads one target's exposition, bounded in time, size and decompressed size: a refused connection, a
timeout, a status other than 200, a body over ``max_bytes`` (gzip'd or not) or text that is not UTF-8 raises
:class:`ScrapeError` naming the target and the problem, never another exception. :class:`ScrapeCollector` scrapes
every target each tick (all at once, so one slow target costs one timeout, not one each) and reads each body by the
series it holds: ``DCGM_FI_*`` into ``Collected.gpus``, ``node_*`` into ``Collected.ports`` (both from one body too).
A target that fails is counted in :attr:`ScrapeCollector.failures` and logged when its state changes, never raised.

GPUs are this daemon's own (``node`` None) while one target has held DCGM series; once several have, each
target's GPUs are tagged with its ``Hostname`` label (or the URL's host), and ports likewise once several targets
have held ``node_*`` series. XIDs: the new codes of dcgm-exporter's last-XID gauge (:class:`~.exposition.XidGauge`).
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from http.client import HTTPException, HTTPResponse
from urllib.parse import urlsplit

from prometheus_client.samples import Sample

from ..samples import GpuSample, PortSample
from .base import Collected
from .exposition import ScrapeError, XidGauge, is_dcgm, is_node_exporter, parse_samples, read_dcgm, read_ports

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_TIMEOUT_S", "ScrapeCollector", "ScrapeError", "fetch"]

log = logging.getLogger(__name__)

#: How long one target may take, connection to last byte (Prometheus's own default scrape timeout is 10 s).
DEFAULT_TIMEOUT_S = 5.0
#: The largest exposition read, before or after gzip: an 8-GPU dcgm-exporter body is ~100 kB, a full node-exporter
#: one ~300 kB; past 16 MiB a target is misconfigured, not busy.
DEFAULT_MAX_BYTES = 16 << 20
#: What one read from the socket asks for: the total deadline is checked between reads.
_CHUNK_BYTES = 64 << 10
#: The classic text format (version 0.0.4), which the Prometheus client library's text parser reads.
_ACCEPT = "text/plain;version=0.0.4;q=1.0, */*;q=0.1"
#: zlib's window bits for a gzip member (header and trailer checked).
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_OK = 200
_MAX_WORKERS = 8


def fetch(url: str, timeout_s: float = DEFAULT_TIMEOUT_S, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The exposition text at ``url`` (http or https), or :class:`ScrapeError` saying why not."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise ScrapeError(url, "url", "not an http(s) URL")
    headers = {"Accept": _ACCEPT, "Accept-Encoding": "gzip"}
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - http(s) only, checked above
    deadline = time.monotonic() + timeout_s
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - http(s) only
            if response.status != _OK:
                raise ScrapeError(url, "http", f"HTTP {response.status} {response.reason}, not 200")
            body = _read(response, url, max_bytes, deadline)
            encoding = (response.headers.get("Content-Encoding") or "identity").strip().lower()
    except ScrapeError:
        raise
    except urllib.error.HTTPError as exc:
        raise ScrapeError(url, "http", f"HTTP {exc.code} {exc.reason}, not 200") from exc
    except urllib.error.URLError as exc:
        kind = "timeout" if isinstance(exc.reason, TimeoutError) else "connect"
        raise ScrapeError(url, kind, f"cannot connect ({exc.reason})") from exc
    except TimeoutError as exc:
        raise ScrapeError(url, "timeout", f"no answer within {timeout_s:g} s") from exc
    except (HTTPException, OSError, ValueError) as exc:  # reset, bad status line, malformed URL …
        raise ScrapeError(url, "connect", f"connection failed ({type(exc).__name__}: {exc})") from exc
    return _decode(_decompress(body, encoding, url, max_bytes), url)


def _read(response: HTTPResponse, url: str, max_bytes: int, deadline: float) -> bytes:
    """At most ``max_bytes`` of the body (one more byte read tells that it is longer), by ``deadline``."""
    chunks, size = [], 0
    while size <= max_bytes:
        if time.monotonic() > deadline:
            raise ScrapeError(url, "timeout", f"body not read within the timeout ({size} bytes so far)")
        chunk = response.read1(min(_CHUNK_BYTES, max_bytes + 1 - size))  # what has arrived: a drip cannot stall it
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    raise ScrapeError(url, "size", f"body larger than {max_bytes} bytes")


def _decompress(body: bytes, encoding: str, url: str, max_bytes: int) -> bytes:
    """The body as sent before Content-Encoding, never more than ``max_bytes`` (a gzip bomb stops there)."""
    if encoding == "identity":
        return body
    if encoding not in ("gzip", "x-gzip"):
        raise ScrapeError(url, "encoding", f"unsupported Content-Encoding {encoding!r}")
    inflate = zlib.decompressobj(_GZIP_WBITS)
    try:
        out = inflate.decompress(body, max_bytes + 1)  # inflates at most one byte past the limit
    except zlib.error as exc:
        raise ScrapeError(url, "encoding", f"body is not valid gzip ({exc})") from exc
    if len(out) > max_bytes:
        raise ScrapeError(url, "size", f"gzip body inflates past {max_bytes} bytes")
    if not inflate.eof:
        raise ScrapeError(url, "encoding", "gzip body is truncated")
    return out


def _decode(body: bytes, url: str) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScrapeError(url, "encoding", f"body is not UTF-8 (byte {exc.start})") from exc


class ScrapeCollector:
    """Scrapes dcgm-exporter and node-exporter targets; ``failures`` counts each URL's failed scrapes."""

    name = "scrape"

    def __init__(
        self,
        urls: Sequence[str],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_bytes: int = DEFAULT_MAX_BYTES,
        on_failure: Callable[[str], None] | None = None,
    ) -> None:
        """``on_failure`` is told this collector's name at each failed scrape (the daemon counts it)."""
        bad = [url for url in urls if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname]
        if bad or not urls:
            raise ValueError(f"scrape targets must be http(s) URLs: {bad or 'none given'}")
        self.urls = tuple(dict.fromkeys(urls))
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.failures: dict[str, int] = dict.fromkeys(self.urls, 0)
        self._on_failure = on_failure
        self._problem: dict[str, str | None] = dict.fromkeys(self.urls)  # the failing kind now; None: healthy
        self._dcgm_targets: set[str] = set()  # the URLs that ever held DCGM series, and node-exporter ones
        self._port_targets: set[str] = set()
        self._xids = XidGauge()
        self._pool = ThreadPoolExecutor(max_workers=min(_MAX_WORKERS, len(self.urls)), thread_name_prefix="scrape")

    def collect(self, now: float) -> Collected:
        """Every target once; what the ones that answered hold (None: no target holds that kind of series)."""
        scraped = zip(self.urls, self._pool.map(self._samples, self.urls), strict=True)
        bodies = {url: samples for url, samples in scraped if samples}
        for url, samples in bodies.items():
            if is_dcgm(samples):
                self._dcgm_targets.add(url)
            if is_node_exporter(samples):
                self._port_targets.add(url)
        gpus = [self._gpus(url, samples) for url, samples in bodies.items() if url in self._dcgm_targets]
        ports = [self._ports(url, samples) for url, samples in bodies.items() if url in self._port_targets]
        return Collected(
            gpus=tuple(g for part in gpus for g in part) if gpus else None,
            ports=tuple(p for part in ports for p in part) if ports else None,
        )

    def close(self) -> None:
        """Stop the scraping threads (a scrape in flight ends within its timeout)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _samples(self, url: str) -> list[Sample] | None:
        """One target's samples, or None when it failed (counted and, on a change of state, logged)."""
        try:
            samples = parse_samples(fetch(url, self.timeout_s, self.max_bytes), url)
            if not is_dcgm(samples) and not is_node_exporter(samples):
                raise ScrapeError(url, "content", "holds no DCGM_FI_* or node_* series")
        except ScrapeError as exc:
            self._failed(url, exc.kind, str(exc))
            return None
        except Exception as exc:  # noqa: BLE001 - counted and logged like any failure: a bug must not stop the loop
            self._failed(url, "internal", f"{url}: {type(exc).__name__}: {exc}")
            return None
        if self._problem[url] is not None:
            log.info("scraping %s again", url)
            self._problem[url] = None
        return samples

    def _gpus(self, url: str, samples: list[Sample]) -> list[GpuSample]:
        """A target's GPUs; each with an XID gauge gets the XIDs new since the previous scrape."""
        reading = read_dcgm(samples, self._node(url, samples, self._dcgm_targets))
        new = self._xids.new_codes(reading.last_xid)
        return [replace(gpu, xid_errors=new[gpu.key]) if gpu.key in new else gpu for gpu in reading.gpus]

    def _ports(self, url: str, samples: list[Sample]) -> tuple[PortSample, ...]:
        return read_ports(samples, self._node(url, samples, self._port_targets))

    @staticmethod
    def _node(url: str, samples: list[Sample], targets: set[str]) -> str | None:
        """None while one target of a kind is known; else the body's one Hostname label, or the URL's host."""
        if len(targets) <= 1:
            return None
        hostnames = {s.labels["Hostname"] for s in samples if s.labels.get("Hostname")}
        return hostnames.pop() if len(hostnames) == 1 else urlsplit(url).hostname

    def _failed(self, url: str, kind: str, message: str) -> None:
        self.failures[url] += 1
        if self._on_failure is not None:
            self._on_failure(self.name)
        if self._problem[url] != kind:
            log.warning("scrape target failing: %s", message)
            self._problem[url] = kind
