"""GPU samples from ``nvidia-smi --query-gpu``, for hosts where NVML cannot be
loaded from Python but the driver's own tool runs (containers, odd bindings).

Parsing is a pure function (:func:`parse_query_output`) so recorded output can
be tested without a GPU. Running is bounded: a hung ``nvidia-smi`` — usually
stuck inside the driver — is killed with its process group, the tick yields no
GPUs, and while a killed one refuses to die no second one is started, so a sick
driver does not collect a pile of stuck processes.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from typing import Any

from ..samples import GpuSample
from ._nvml import NVML_H_REASON_BITS, decode_reasons
from ._once import LogOnce
from .base import Collected
from .kmsg import KernelLogFactory
from .smi_xids import SmiKernelXids

log = logging.getLogger(__name__)

DEFAULT_BINARY = "nvidia-smi"
DEFAULT_TIMEOUT_S = 5.0
#: Since driver 535 the mask is a clock *event*; older drivers only know the throttle name.
EVENT_REASONS_FIELD = "clocks_event_reasons.active"
THROTTLE_REASONS_FIELD = "clocks_throttle_reasons.active"
_NOT_A_FIELD = "is not a valid field to query"
_KILL_GRACE_S = 0.5
_MIB = 1024 * 1024

#: What nvidia-smi prints for "no value": ``[N/A]``, ``[Not Supported]``,
#: ``[Unknown Error]``, ``[Insufficient Permissions]``, … all bracketed.
_NO_VALUE = {"", "N/A", "Not Supported"}

ErrorHandler = Callable[[int, str, str], None]
"""``(line_number, column, message)`` for a value or line that does not parse."""


class SmiParseError(ValueError):
    """A line of nvidia-smi output that cannot be a GPU sample; ``column`` says where."""

    def __init__(self, column: str, message: str) -> None:
        super().__init__(f"{column}: {message}")
        self.column = column


class SmiTimeout(Exception):
    """nvidia-smi did not answer in time; ``straggler`` is set if it would not die."""

    def __init__(self, straggler: subprocess.Popen | None) -> None:
        super().__init__("nvidia-smi timed out")
        self.straggler = straggler


# ------------------------------------------------------------------ parsing


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {text!r}")
    return value


def _mib_to_bytes(text: str) -> int:
    return round(_finite(text) * _MIB)


def _reasons(text: str) -> tuple[str, ...]:
    return decode_reasons(int(text, 16), NVML_H_REASON_BITS)


#: (GpuSample field, converter) in the order of the query's columns.
_COLUMNS: tuple[tuple[str, Callable[[str], Any]], ...] = (
    ("index", int),
    ("uuid", str),
    ("name", str),
    ("utilization_percent", _finite),
    ("memory_utilization_percent", _finite),
    ("memory_used_bytes", _mib_to_bytes),
    ("memory_total_bytes", _mib_to_bytes),
    ("temperature_celsius", _finite),
    ("power_watts", _finite),
    ("power_limit_watts", _finite),
    ("sm_clock_mhz", _finite),
    ("max_sm_clock_mhz", _finite),
    ("throttle_reasons", _reasons),
    ("ecc_uncorrected_errors", int),
)


def _yes_no(text: str) -> int:
    """nvidia-smi's ``Yes``/``No`` flags (remapped rows) as 1/0."""
    flag = {"yes": 1, "no": 0}.get(text.lower())
    if flag is None:
        raise ValueError(f"not Yes or No: {text!r}")
    return flag


#: Memory-fault fields appended to the query where the driver knows them (ECC-capable datacenter GPUs;
#: ``remapped_rows.*`` since Ampere): (query field, GpuSample field, converter).
FAULT_FIELDS: tuple[tuple[str, str, Callable[[str], Any]], ...] = (
    ("ecc.errors.corrected.volatile.total", "ecc_corrected_errors", int),
    ("remapped_rows.pending", "remapped_rows_pending", _yes_no),
    ("remapped_rows.failure", "remapped_rows_failed", _yes_no),
)
_FAULT_COLUMNS = _COLUMNS + tuple((field, convert) for _, field, convert in FAULT_FIELDS)


def query_fields(reasons_field: str = EVENT_REASONS_FIELD, faults: bool = False) -> tuple[str, ...]:
    """The ``--query-gpu`` fields, in the order :data:`_COLUMNS` reads them (then :data:`FAULT_FIELDS`)."""
    extra = tuple(name for name, _, _ in FAULT_FIELDS) if faults else ()
    return (
        "index",
        "uuid",
        "name",
        "utilization.gpu",
        "utilization.memory",
        "memory.used",
        "memory.total",
        "temperature.gpu",
        "power.draw",
        "power.limit",
        "clocks.sm",
        "clocks.max.sm",
        reasons_field,
        "ecc.errors.uncorrected.volatile.total",
        *extra,
    )


def query_command(
    binary: str = DEFAULT_BINARY, reasons_field: str = EVENT_REASONS_FIELD, faults: bool = False
) -> list[str]:
    """The full argv of one query."""
    fields = ",".join(query_fields(reasons_field, faults))
    return [binary, f"--query-gpu={fields}", "--format=csv,noheader,nounits"]


def _cell(text: str) -> str | None:
    """The cell's text, or None for nvidia-smi's "no value" markers."""
    text = text.strip()
    if text in _NO_VALUE or (text.startswith("[") and text.endswith("]")):
        return None
    return text


def parse_row(row: list[str], on_bad_value: Callable[[str, str], None] | None = None) -> GpuSample:
    """One CSV row -> GpuSample: the base columns, or those and the :data:`FAULT_FIELDS` (told apart by count).

    A wrong column count or a missing index makes the row unusable
    (:class:`SmiParseError`); a single value that does not parse becomes None
    and is reported through ``on_bad_value(column, message)``.
    """
    columns = _FAULT_COLUMNS if len(row) == len(_FAULT_COLUMNS) else _COLUMNS
    if len(row) != len(columns):
        raise SmiParseError("row", f"expected {len(_COLUMNS)} or {len(_FAULT_COLUMNS)} values, got {len(row)}")
    values: dict[str, Any] = {}
    for (field, convert), raw in zip(columns, row, strict=True):
        text = _cell(raw)
        if text is None:
            continue
        try:
            values[field] = convert(text)
        except ValueError:
            if field == "index":
                raise SmiParseError("index", f"not an integer: {text!r}") from None
            if on_bad_value is not None:
                on_bad_value(field, f"cannot read {text!r}")
    if "index" not in values:
        raise SmiParseError("index", "missing")
    return GpuSample(**values)


def _warn(line: int, column: str, message: str) -> None:
    log.warning("nvidia-smi output line %d, %s: %s", line, column, message)


def parse_query_output(text: str, on_error: ErrorHandler | None = None, faults: bool = False) -> tuple[GpuSample, ...]:
    """Parse ``--format=csv,noheader,nounits`` output of :func:`query_command` (with ``faults`` as queried).

    Lines that are not GPU rows (``Unable to determine the device handle for
    GPU …: GPU is lost``) and duplicate indices are skipped and reported
    through ``on_error`` (default: a warning each time); samples come back in
    index order.
    """
    report = on_error or _warn
    samples: dict[int, GpuSample] = {}
    for line_no, row in enumerate(csv.reader(io.StringIO(text), skipinitialspace=True), 1):
        if not any(cell.strip() for cell in row):
            continue
        try:
            sample = parse_row(row, lambda col, msg, n=line_no: report(n, col, msg))
        except SmiParseError as exc:
            report(line_no, exc.column, f"{exc}; skipping the line")
            continue
        if sample.index in samples:
            report(line_no, "index", f"duplicate GPU index {sample.index}; skipping the line")
            continue
        samples[sample.index] = sample
    return tuple(samples[i] for i in sorted(samples))


# ------------------------------------------------------------------ running


def _kill(proc: subprocess.Popen) -> subprocess.Popen | None:
    """SIGKILL the process group; return the process if it will not die (stuck in the driver)."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - not POSIX
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=_KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        return proc
    return None


def run_bounded(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run ``cmd`` in its own session; kill it (and its children) after ``timeout``.

    Raises :class:`SmiTimeout` on timeout and OSError when it cannot start.
    Returns within about ``timeout + 0.5`` seconds even if the process is
    unkillable: such a process is handed back in ``SmiTimeout.straggler``.
    """
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SmiTimeout(_kill(proc)) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _refuses_fault_fields(output: str) -> bool:
    """True when nvidia-smi says one of :data:`FAULT_FIELDS` is not a field it knows (``Field "…" is not a valid …``)."""
    return _NOT_A_FIELD in output and any(f'"{name}"' in output for name, _, _ in FAULT_FIELDS)


def _first_line(result: subprocess.CompletedProcess) -> str:
    text = (result.stderr or "").strip() or (result.stdout or "").strip()
    return text.splitlines()[0] if text else "no output"


class SmiCollector:
    """Runs one ``nvidia-smi`` query per tick; ``collect()`` returns ``Collected(gpus=...)``."""

    name = "nvidia-smi"

    def __init__(
        self,
        binary: str = DEFAULT_BINARY,
        timeout: float = DEFAULT_TIMEOUT_S,
        kernel_log: KernelLogFactory | None = None,
    ) -> None:
        """``kernel_log`` opens the kernel log XIDs are read from (None: XIDs unknown, ``xid_errors`` left out)."""
        self.binary = binary
        self.timeout = timeout
        self._xids = SmiKernelXids(binary, self._run_once, kernel_log)
        self._reasons_field = EVENT_REASONS_FIELD
        self._faults = True  # ask for FAULT_FIELDS until the driver says it does not know them
        self._straggler: subprocess.Popen | None = None
        self._trouble: str | None = None  # the current failure episode, logged once
        self._log_once = LogOnce(log)

    @staticmethod
    def available(binary: str = DEFAULT_BINARY, timeout: float = DEFAULT_TIMEOUT_S) -> bool:
        """True when ``binary`` is on PATH and lists at least one GPU (for ``-mode auto``)."""
        path = shutil.which(binary)
        if path is None:
            return False
        try:
            result = run_bounded([path, "--query-gpu=index", "--format=csv,noheader"], timeout)
        except (OSError, SmiTimeout):
            return False
        rows = result.stdout.splitlines()
        return result.returncode == 0 and any(r.strip().isdigit() for r in rows)

    def describe(self) -> str:
        """One line for logs and the snapshot."""
        return f"nvidia-smi: {self.binary} ({self._reasons_field}, timeout {self.timeout:g}s)"

    def collect(self, now: float) -> Collected:
        """One sample per GPU row; no GPUs when nvidia-smi fails or hangs."""
        text = self._query()
        if text is None:
            return Collected(gpus=())
        return Collected(gpus=self._xids.attach(parse_query_output(text, on_error=self._parse_error)))

    def close(self) -> None:
        """Forget a stuck nvidia-smi (it was already killed) and close the kernel log."""
        self._reap()
        self._xids.close()

    def _run_once(self, cmd: list[str]) -> subprocess.CompletedProcess | None:
        """One bounded command outside the tick's query (the PCI bus ids); None when it fails."""
        try:
            return run_bounded(cmd, self.timeout)
        except (OSError, SmiTimeout):
            return None

    # ------------------------------------------------------------ internals

    def _query(self) -> str | None:
        if self._still_stuck():
            return None
        result = self._run()
        if result is not None and self._faults and _refuses_fault_fields(result.stdout + result.stderr):
            log.info(
                "this nvidia-smi does not know %s; querying without them", ", ".join(f for f, _, _ in FAULT_FIELDS)
            )
            self._faults = False
            result = self._run()
        if (
            result is not None
            and self._reasons_field == EVENT_REASONS_FIELD
            and _NOT_A_FIELD in result.stdout + result.stderr
        ):
            log.info("this nvidia-smi predates clock events; asking for %s", THROTTLE_REASONS_FIELD)
            self._reasons_field = THROTTLE_REASONS_FIELD
            result = self._run()
        if result is None:
            return None
        if result.returncode != 0:
            self._episode("exit", "nvidia-smi exited with %d: %s", result.returncode, _first_line(result))
        elif self._trouble is not None:
            log.info("nvidia-smi answers again")
            self._trouble = None
        return result.stdout

    def _run(self) -> subprocess.CompletedProcess | None:
        cmd = query_command(self.binary, self._reasons_field, self._faults)
        try:
            return run_bounded(cmd, self.timeout)
        except SmiTimeout as exc:
            self._straggler = exc.straggler
            self._episode(
                "timeout", "nvidia-smi gave no answer in %gs; killed it, no GPU samples until it answers", self.timeout
            )
        except OSError as exc:
            self._episode("start", "cannot run %s: %s", self.binary, exc)
        return None

    def _still_stuck(self) -> bool:
        """True while a killed nvidia-smi is still alive: do not start another."""
        if self._straggler is None or self._straggler.poll() is not None:
            self._reap()
            return False
        return True

    def _reap(self) -> None:
        proc, self._straggler = self._straggler, None
        if proc is not None:
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()

    def _episode(self, kind: str, msg: str, *args: Any) -> None:
        """Log a failure when it starts, not on every tick it lasts."""
        if self._trouble != kind:
            self._trouble = kind
            log.warning(msg, *args)

    def _parse_error(self, line: int, column: str, message: str) -> None:
        """Log a parse problem once per column ("row" for a line that is not a GPU)."""
        self._log_once(
            (column,), logging.WARNING, "nvidia-smi output line %d, %s: %s (logged once)", line, column, message
        )
